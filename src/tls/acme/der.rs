//! Just enough DER (X.690) to read what renewal needs from a certificate (RFC 5280 §4.1): the
//! end of its validity.
//!
//! Owns: walking a certificate's TLVs. Must not touch: verifying anything (rustls and the CA
//! do that).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

const SEQUENCE: u8 = 0x30;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;
/// `[0] EXPLICIT Version`, the optional first member of a TBSCertificate.
const VERSION: u8 = 0xa0;

/// One TLV: its tag, its contents, and what follows it.
pub(super) fn next(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let length = if first < 0x80 {
        usize::from(first)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let (bytes, after) = rest.split_at(count);
        rest = after;
        bytes
            .iter()
            .fold(0usize, |length, &byte| length << 8 | usize::from(byte))
    };
    (rest.len() >= length).then(|| (tag, &rest[..length], &rest[length..]))
}

/// The contents of the TLV at the start of `input` if its tag is `tag`, and what follows.
pub(super) fn expect(input: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (found, contents, rest) = next(input)?;
    (found == tag).then_some((contents, rest))
}

/// The TBSCertificate's members after the version: serial, signature, issuer, validity, ….
pub(super) fn tbs_members(certificate: &[u8]) -> Option<&[u8]> {
    let (certificate, _) = expect(certificate, SEQUENCE)?;
    let (tbs, _) = expect(certificate, SEQUENCE)?;
    Some(match next(tbs)? {
        (VERSION, _, rest) => rest,
        _ => tbs,
    })
}

/// The certificate's `notAfter`.
#[must_use]
pub fn not_after(certificate: &[u8]) -> Option<SystemTime> {
    let members = tbs_members(certificate)?;
    let (_, _, rest) = next(members)?; // serialNumber
    let (_, _, rest) = next(rest)?; // signature
    let (_, _, rest) = next(rest)?; // issuer
    let (validity, _) = expect(rest, SEQUENCE)?;
    let (_, _, rest) = next(validity)?; // notBefore
    let (tag, time, _) = next(rest)?;
    time_of(tag, std::str::from_utf8(time).ok()?)
}

/// `YYMMDDHHMMSSZ` (UTCTime, RFC 5280 §4.1.2.5.1) or `YYYYMMDDHHMMSSZ` (GeneralizedTime).
fn time_of(tag: u8, text: &str) -> Option<SystemTime> {
    let digits = text.strip_suffix('Z')?;
    if !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    let (year, rest) = match (tag, digits.len()) {
        (UTC_TIME, 12) => {
            let short: i64 = digits[..2].parse().ok()?;
            (
                if short >= 50 {
                    1900 + short
                } else {
                    2000 + short
                },
                &digits[2..],
            )
        }
        (GENERALIZED_TIME, 14) => (digits[..4].parse().ok()?, &digits[4..]),
        _ => return None,
    };
    let field = |at: usize| rest[at..at + 2].parse::<i64>().ok();
    let (month, day) = (field(0)?, field(2)?);
    let (hour, minute, second) = (field(4)?, field(6)?, field(8)?);
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second;
    Some(UNIX_EPOCH + Duration::from_secs(u64::try_from(seconds).ok()?))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
pub(super) mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::{
        expect, next, not_after, tbs_members, time_of, GENERALIZED_TIME, SEQUENCE, UTC_TIME,
    };

    /// The extension `oid` (its DER contents) of `certificate`: (critical, extnValue's contents).
    pub(in crate::tls::acme) fn extension<'a>(
        certificate: &'a [u8],
        oid: &[u8],
    ) -> Option<(bool, &'a [u8])> {
        let mut rest = tbs_members(certificate)?;
        while let Some((tag, contents, after)) = next(rest) {
            rest = after;
            if tag != 0xa3 {
                continue;
            }
            let (mut extensions, _) = expect(contents, SEQUENCE)?;
            while let Some((extension, after)) = expect(extensions, SEQUENCE) {
                extensions = after;
                let (id, members) = expect(extension, 0x06)?;
                if id != oid {
                    continue;
                }
                let (critical, members) = match expect(members, 0x01) {
                    Some((flag, members)) => (flag == [0xff], members),
                    None => (false, members),
                };
                let (value, _) = expect(members, 0x04)?;
                return Some((critical, value));
            }
        }
        None
    }

    #[test]
    fn times_in_both_forms() {
        assert_eq!(time_of(UTC_TIME, "700101000000Z"), Some(UNIX_EPOCH));
        assert_eq!(
            time_of(UTC_TIME, "491231235959Z"),
            Some(UNIX_EPOCH + Duration::from_secs(2_524_607_999))
        );
        assert_eq!(
            time_of(GENERALIZED_TIME, "20500101000000Z"),
            Some(UNIX_EPOCH + Duration::from_secs(2_524_608_000))
        );
        assert_eq!(time_of(UTC_TIME, "7001010000Z"), None);
        assert_eq!(time_of(UTC_TIME, "70010100000aZ"), None);
    }

    #[test]
    fn not_after_of_a_made_certificate() {
        let mut params = rcgen::CertificateParams::new(vec!["a.test".to_owned()]).unwrap();
        params.not_after = rcgen::date_time_ymd(2031, 7, 9);
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let certificate = params.self_signed(&key).unwrap();
        let end = not_after(certificate.der()).unwrap();
        // 2031-07-09T00:00:00Z
        assert_eq!(end, UNIX_EPOCH + Duration::from_secs(1_941_321_600));
        assert_eq!(not_after(b"\x30\x03\x02\x01"), None);
    }
}
