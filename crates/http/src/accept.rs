//! Proactive negotiation (RFC 9110 §12): the `Accept`, `Accept-Encoding` and `Accept-Language`
//! request fields with their weights, and the server's choice among what it can send.
//!
//! Owns: member syntax (quoted strings, parameters, qvalues), media-range specificity (§12.5.1),
//! language-range matching (RFC 4647 §3.3.1 basic filtering), and the selection functions.
//! Must not know file names, configured preferences or `Vary` (the server passes what it offers
//! and adds `Vary` for what it consulted).
//!
//! A malformed member is ignored, never the whole field (RFC 9110 §5.6.1: a recipient
//! tolerates what it cannot parse in a list). The parsers read at most [`MAX_MEMBERS`] members
//! of a field and [`MAX_PARAMETERS`] parameters of a member (allocating only those), so a
//! selection costs at most one pass over the value per candidate, whatever a client sends (a
//! 100 KiB field included).

use crate::token::{is_tchar, is_token, trim_ows};

/// Members of one field read at most; the rest are ignored. Browsers send under ten; a list of
/// thousands is only ever an attempt to make the server work.
pub const MAX_MEMBERS: usize = 64;

/// Parameters of one member read at most; a member with more is ignored (a media type has one
/// or two: `charset`, `level`, `profile`).
pub const MAX_PARAMETERS: usize = 16;

/// A qvalue (RFC 9110 §12.4.2) in thousandths: 0 is "not acceptable", 1000 the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Weight(u16);

impl Weight {
    pub const ZERO: Weight = Weight(0);
    /// The smallest weight that is still acceptable.
    pub const MIN: Weight = Weight(1);
    pub const ONE: Weight = Weight(1000);

    /// The weight of `thousandths` (clamped to 1000).
    #[must_use]
    pub fn from_thousandths(thousandths: u16) -> Weight {
        Weight(thousandths.min(1000))
    }

    #[must_use]
    pub fn thousandths(self) -> u16 {
        self.0
    }

    #[must_use]
    pub fn is_acceptable(self) -> bool {
        self.0 > 0
    }

    /// Parses `qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )`.
    #[must_use]
    pub fn parse(text: &[u8]) -> Option<Weight> {
        let (&leading, rest) = text.split_first()?;
        let fraction = match rest {
            [] => &[][..],
            [b'.', fraction @ ..] if fraction.len() <= 3 => fraction,
            _ => return None,
        };
        if !fraction.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let mut thousandths = 0u16;
        for position in 0..3 {
            let digit = fraction.get(position).map_or(0, |&b| u16::from(b - b'0'));
            thousandths = thousandths * 10 + digit;
        }
        match leading {
            b'0' => Some(Weight(thousandths)),
            b'1' if thousandths == 0 => Some(Weight::ONE),
            _ => None,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Syntax shared by the three fields.

/// The members of a comma-separated list (`#rule`, RFC 9110 §5.6.1): split at commas outside
/// quoted strings, OWS-trimmed, empty members skipped, at most [`MAX_MEMBERS`].
fn members(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    Members { rest: value }
        .filter(|member| !member.is_empty())
        .take(MAX_MEMBERS)
}

struct Members<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Members<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.rest.is_empty() {
            return None;
        }
        let mut quoted = false;
        let mut escaped = false;
        let mut end = self.rest.len();
        for (index, &b) in self.rest.iter().enumerate() {
            if escaped {
                escaped = false;
            } else if quoted {
                match b {
                    b'\\' => escaped = true,
                    b'"' => quoted = false,
                    _ => {}
                }
            } else if b == b'"' {
                quoted = true;
            } else if b == b',' {
                end = index;
                break;
            }
        }
        let member = &self.rest[..end];
        self.rest = self.rest.get(end + 1..).unwrap_or_default();
        Some(trim_ows(member))
    }
}

/// One `;`-separated parameter (RFC 9110 §5.6.6): its name and its value, a token or a quoted
/// string (with its quotes and escapes as sent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parameter<'a> {
    pub name: &'a [u8],
    pub value: &'a [u8],
}

impl Parameter<'_> {
    /// Whether this parameter is the weight (`q`, any case).
    fn is_weight(&self) -> bool {
        self.name.eq_ignore_ascii_case(b"q")
    }

    /// The value with a quoted string's quotes and escapes removed, compared without case
    /// (the parameters of the media types a server offers, `charset` and `level`, are
    /// case-insensitive).
    fn value_matches(&self, other: &[u8]) -> bool {
        let Some(inner) = self
            .value
            .strip_prefix(b"\"")
            .and_then(|value| value.strip_suffix(b"\""))
        else {
            return self.value.eq_ignore_ascii_case(other);
        };
        let mut unescaped = inner.iter().copied().filter({
            let mut escaped = false;
            move |&b| {
                if escaped {
                    escaped = false;
                    true
                } else if b == b'\\' {
                    escaped = true;
                    false
                } else {
                    true
                }
            }
        });
        let mut other = other.iter();
        loop {
            match (unescaped.next(), other.next()) {
                (None, None) => return true,
                (Some(a), Some(&b)) if a.eq_ignore_ascii_case(&b) => {}
                _ => return false,
            }
        }
    }
}

/// Splits a member into what precedes its first `;` (trimmed) and its parameters; `None` when a
/// parameter is malformed (then the whole member is ignored).
fn split_member(member: &[u8]) -> Option<(&[u8], Vec<Parameter<'_>>)> {
    let head_end = member
        .iter()
        .position(|&b| b == b';')
        .unwrap_or(member.len());
    let head = trim_ows(&member[..head_end]);
    let mut parameters = Vec::new();
    let mut rest = &member[head_end..];
    while let Some((parameter, after)) = next_parameter(rest)? {
        if parameters.len() == MAX_PARAMETERS {
            return None;
        }
        parameters.push(parameter);
        rest = after;
    }
    Some((head, parameters))
}

/// Reads `OWS ";" OWS name "=" value` from the front of `rest`: `Some(None)` at its end,
/// `None` when what is there is not a parameter. An empty parameter (`;;`) is skipped, as
/// RFC 9110 §5.6.6 allows.
#[allow(clippy::option_option)]
fn next_parameter(mut rest: &[u8]) -> Option<Option<(Parameter<'_>, &[u8])>> {
    loop {
        rest = trim_ows(rest);
        match rest.split_first() {
            None => return Some(None),
            Some((b';', after)) => {
                rest = trim_ows(after);
                if rest.is_empty() || rest[0] == b';' {
                    continue;
                }
                break;
            }
            Some(_) => return None,
        }
    }
    let name_len = rest
        .iter()
        .position(|&b| !is_tchar(b))
        .unwrap_or(rest.len());
    if name_len == 0 || rest.get(name_len) != Some(&b'=') {
        return None;
    }
    let name = &rest[..name_len];
    let value_start = name_len + 1;
    let value_len = if rest.get(value_start) == Some(&b'"') {
        quoted_string_len(&rest[value_start..])?
    } else {
        let len = rest[value_start..]
            .iter()
            .position(|&b| !is_tchar(b))
            .unwrap_or(rest.len() - value_start);
        if len == 0 {
            return None;
        }
        len
    };
    let value = &rest[value_start..value_start + value_len];
    Some(Some((
        Parameter { name, value },
        &rest[value_start + value_len..],
    )))
}

/// The length of the quoted string at the front of `text` (RFC 9110 §5.6.4), quotes included.
fn quoted_string_len(text: &[u8]) -> Option<usize> {
    let mut escaped = false;
    for (index, &b) in text.iter().enumerate().skip(1) {
        let allowed = b == b'\t' || (b >= 0x20 && b != 0x7f);
        if !allowed {
            return None;
        }
        if escaped {
            escaped = false;
        } else if b == b'\\' {
            escaped = true;
        } else if b == b'"' {
            return Some(index + 1);
        }
    }
    None
}

/// The weight among `parameters` and the parameters before it: those after it are
/// extensions (RFC 7231's accept-ext, which old clients still send) and ignored. `None` when
/// the weight is malformed.
fn weight_of<'p, 'a>(parameters: &'p [Parameter<'a>]) -> Option<(Weight, &'p [Parameter<'a>])> {
    match parameters.iter().position(Parameter::is_weight) {
        None => Some((Weight::ONE, parameters)),
        Some(index) => Some((
            Weight::parse(parameters[index].value)?,
            &parameters[..index],
        )),
    }
}

// ---------------------------------------------------------------------------------------------
// Accept-Encoding (RFC 9110 §12.5.3).

/// One member of `Accept-Encoding`: a content coding, `identity` or `*`, and its weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodingPreference<'a> {
    /// As sent: compare without case.
    pub coding: &'a [u8],
    pub weight: Weight,
}

/// The well-formed members of an `Accept-Encoding` value, in order. Only a weight may follow a
/// coding (`codings [ weight ]`): a member with any other parameter is ignored.
pub fn accept_encoding(value: &[u8]) -> impl Iterator<Item = CodingPreference<'_>> {
    members(value).filter_map(|member| {
        let (coding, parameters) = split_member(member)?;
        if !is_token(coding) {
            return None;
        }
        let weight = match parameters.as_slice() {
            [] => Weight::ONE,
            [q] if q.is_weight() => Weight::parse(q.value)?,
            _ => return None,
        };
        Some(CodingPreference { coding, weight })
    })
}

/// Whether the member's coding names `coding`: without case, and `x-gzip` is `gzip`
/// (RFC 9110 §8.4.1.3).
fn names_coding(sent: &[u8], coding: &str) -> bool {
    sent.eq_ignore_ascii_case(coding.as_bytes())
        || (coding.eq_ignore_ascii_case("gzip") && sent.eq_ignore_ascii_case(b"x-gzip"))
}

/// The weight `accept_encoding` gives `coding` (not `identity`): its own member's (the first
/// that names it), else `*`'s, else zero.
#[must_use]
pub fn coding_weight(accept_encoding: &[u8], coding: &str) -> Weight {
    let mut any = None;
    for preference in self::accept_encoding(accept_encoding) {
        if names_coding(preference.coding, coding) {
            return preference.weight;
        }
        if preference.coding == b"*" {
            any.get_or_insert(preference.weight);
        }
    }
    any.unwrap_or(Weight::ZERO)
}

/// The weight `accept_encoding` gives the unencoded representation: `identity`'s own, else
/// `*`'s, else acceptable but below any coding the client named (§12.5.3: identity is always
/// acceptable unless excluded by `identity;q=0`, or by `*;q=0` without an `identity` member).
#[must_use]
pub fn identity_weight(accept_encoding: &[u8]) -> Weight {
    let mut any = None;
    for preference in self::accept_encoding(accept_encoding) {
        if preference.coding.eq_ignore_ascii_case(b"identity") {
            return preference.weight;
        }
        if preference.coding == b"*" {
            any.get_or_insert(preference.weight);
        }
    }
    any.unwrap_or(Weight::MIN)
}

/// What to send, by `Accept-Encoding`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncodingChoice {
    /// `offered[index]`.
    Coding(usize),
    Identity,
    /// The client excluded identity and accepts nothing offered: `406`, or identity anyway
    /// (§12.5.3 allows either; a static server sending what it has helps more).
    NothingAcceptable,
}

/// Chooses among `offered` codings, the server's preference order (best first, `identity` not
/// among them), for a request with `accept_encoding` (`None`: no such field, identity).
///
/// The highest weight wins; equal weights go to the server's order, and any coding to
/// identity at equal weight (it is smaller). A coding of weight zero is never chosen.
#[must_use]
pub fn choose_encoding<S: AsRef<str>>(
    accept_encoding: Option<&[u8]>,
    offered: &[S],
) -> EncodingChoice {
    let Some(value) = accept_encoding else {
        return EncodingChoice::Identity;
    };
    let mut best: Option<(usize, Weight)> = None;
    for (index, coding) in offered.iter().enumerate() {
        let weight = coding_weight(value, coding.as_ref());
        if weight.is_acceptable() && best.is_none_or(|(_, top)| weight > top) {
            best = Some((index, weight));
        }
    }
    let identity = identity_weight(value);
    match best {
        Some((index, weight)) if weight >= identity => EncodingChoice::Coding(index),
        _ if identity.is_acceptable() => EncodingChoice::Identity,
        Some((index, _)) => EncodingChoice::Coding(index),
        None => EncodingChoice::NothingAcceptable,
    }
}

// ---------------------------------------------------------------------------------------------
// Accept (RFC 9110 §12.5.1).

/// One member of `Accept`: a media range, its parameters and its weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaRange<'a> {
    /// `*` or a type, as sent: compare without case.
    pub kind: &'a [u8],
    /// `*` or a subtype.
    pub subtype: &'a [u8],
    /// The media-type parameters (those before the weight).
    pub parameters: Vec<Parameter<'a>>,
    pub weight: Weight,
}

impl MediaRange<'_> {
    /// How specific the range is (§12.5.1: a more specific range overrides a less specific
    /// one): `*/*` 0, `type/*` 1, `type/subtype` 2, plus one per parameter.
    #[must_use]
    pub fn specificity(&self) -> usize {
        if self.kind == b"*" {
            0
        } else if self.subtype == b"*" {
            1
        } else {
            2 + self.parameters.len()
        }
    }

    /// Whether the range covers `media_type` (`type/subtype` and its parameters): every
    /// parameter of the range must be among the media type's.
    #[must_use]
    pub fn matches(&self, media_type: &str) -> bool {
        let Some(offered) = Offered::of(media_type.as_bytes()) else {
            return false;
        };
        if self.kind == b"*" {
            return true;
        }
        if !self.kind.eq_ignore_ascii_case(offered.kind) {
            return false;
        }
        if self.subtype == b"*" {
            return true;
        }
        self.subtype.eq_ignore_ascii_case(offered.subtype)
            && self.parameters.iter().all(|wanted| offered.has(wanted))
    }
}

/// A server's media type split for matching: `type/subtype` and the text of its parameters.
struct Offered<'a> {
    kind: &'a [u8],
    subtype: &'a [u8],
    parameters: &'a [u8],
}

impl<'a> Offered<'a> {
    /// `None` if `media_type` is not `type/subtype[; parameters]`.
    fn of(media_type: &'a [u8]) -> Option<Offered<'a>> {
        let end = media_type
            .iter()
            .position(|&b| b == b';')
            .unwrap_or(media_type.len());
        let essence = trim_ows(&media_type[..end]);
        let slash = essence.iter().position(|&b| b == b'/')?;
        Some(Offered {
            kind: &essence[..slash],
            subtype: &essence[slash + 1..],
            parameters: &media_type[end..],
        })
    }

    /// Whether the type has the parameter `name` with a value `wanted` accepts.
    fn has(&self, wanted: &Parameter<'_>) -> bool {
        self.parameters.split(|&b| b == b';').any(|piece| {
            let piece = trim_ows(piece);
            let Some(equals) = piece.iter().position(|&b| b == b'=') else {
                return false;
            };
            let value = &piece[equals + 1..];
            let value = value
                .strip_prefix(b"\"")
                .and_then(|v| v.strip_suffix(b"\""))
                .unwrap_or(value);
            wanted.name.eq_ignore_ascii_case(&piece[..equals]) && wanted.value_matches(value)
        })
    }
}

/// The well-formed members of an `Accept` value, in order. `*/subtype` is not a range and is
/// ignored.
pub fn accept(value: &[u8]) -> impl Iterator<Item = MediaRange<'_>> {
    members(value).filter_map(|member| {
        let (range, parameters) = split_member(member)?;
        let slash = range.iter().position(|&b| b == b'/')?;
        let (kind, subtype) = (&range[..slash], &range[slash + 1..]);
        if !is_token(kind) || !is_token(subtype) || (kind == b"*" && subtype != b"*") {
            return None;
        }
        let (weight, parameters) = weight_of(&parameters)?;
        Some(MediaRange {
            kind,
            subtype,
            parameters: parameters.to_vec(),
            weight,
        })
    })
}

/// The weight `accept` gives `media_type`: that of the most specific range covering it (the
/// first of equally specific ones), zero when none does. `None` (no field) accepts anything.
#[must_use]
pub fn media_type_weight(accept: Option<&[u8]>, media_type: &str) -> Weight {
    let Some(value) = accept else {
        return Weight::ONE;
    };
    let mut best: Option<(usize, Weight)> = None;
    let mut any_member = false;
    for range in self::accept(value) {
        any_member = true;
        if range.matches(media_type) {
            let specificity = range.specificity();
            if best.is_none_or(|(top, _)| specificity > top) {
                best = Some((specificity, range.weight));
            }
        }
    }
    match best {
        Some((_, weight)) => weight,
        // A field with no member that could be read says nothing: as if absent.
        None if !any_member => Weight::ONE,
        None => Weight::ZERO,
    }
}

// ---------------------------------------------------------------------------------------------
// Accept-Language (RFC 9110 §12.5.4, RFC 4647 §2.1 and §3.3.1).

/// One member of `Accept-Language`: a basic language range (`en`, `en-GB`, `*`) and its weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LanguageRange<'a> {
    /// As sent: compare without case.
    pub range: &'a [u8],
    pub weight: Weight,
}

impl LanguageRange<'_> {
    /// Basic filtering (RFC 4647 §3.3.1): the range equals the tag or is a prefix of it ending
    /// where a subtag ends; `*` matches every tag.
    #[must_use]
    pub fn matches(&self, tag: &str) -> bool {
        let tag = tag.as_bytes();
        if self.range == b"*" {
            return true;
        }
        tag.len() >= self.range.len()
            && tag[..self.range.len()].eq_ignore_ascii_case(self.range)
            && (tag.len() == self.range.len() || tag[self.range.len()] == b'-')
    }
}

/// `language-range = (1*8ALPHA *("-" 1*8alphanum)) / "*"` (RFC 4647 §2.1).
fn is_language_range(range: &[u8]) -> bool {
    if range == b"*" {
        return true;
    }
    let mut subtags = range.split(|&b| b == b'-');
    let first_ok = subtags.next().is_some_and(|first| {
        (1..=8).contains(&first.len()) && first.iter().all(u8::is_ascii_alphabetic)
    });
    first_ok
        && subtags.all(|subtag| {
            (1..=8).contains(&subtag.len()) && subtag.iter().all(u8::is_ascii_alphanumeric)
        })
}

/// The well-formed members of an `Accept-Language` value, in order.
pub fn accept_language(value: &[u8]) -> impl Iterator<Item = LanguageRange<'_>> {
    members(value).filter_map(|member| {
        let (range, parameters) = split_member(member)?;
        if !is_language_range(range) {
            return None;
        }
        let weight = match parameters.as_slice() {
            [] => Weight::ONE,
            [q] if q.is_weight() => Weight::parse(q.value)?,
            _ => return None,
        };
        Some(LanguageRange { range, weight })
    })
}

/// The weight `accept_language` gives a variant in language `tag`: that of the longest range
/// matching it (`*` the shortest), zero when none does. A variant without a language
/// (`None`) is acceptable but below any language the client named. `accept_language` `None`
/// (no field), or a field with no readable member, accepts every language alike.
#[must_use]
pub fn language_weight(accept_language: Option<&[u8]>, tag: Option<&str>) -> Weight {
    let Some(value) = accept_language else {
        return Weight::ONE;
    };
    let mut best: Option<(usize, Weight)> = None;
    let mut any_member = false;
    for range in self::accept_language(value) {
        any_member = true;
        let Some(tag) = tag else { continue };
        if range.matches(tag) {
            let length = if range.range == b"*" {
                0
            } else {
                range.range.len()
            };
            if best.is_none_or(|(top, _)| length > top) {
                best = Some((length, range.weight));
            }
        }
    }
    match best {
        Some((_, weight)) => weight,
        None if !any_member => Weight::ONE,
        None if tag.is_none() => Weight::MIN,
        None => Weight::ZERO,
    }
}

// ---------------------------------------------------------------------------------------------
// Choosing a variant.

/// One representation a server can send for a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant<'a> {
    /// Its `Content-Type` (`text/html; charset=utf-8`).
    pub media_type: &'a str,
    /// Its `Content-Language` tag, if it has one.
    pub language: Option<&'a str>,
}

/// Chooses among `variants`, the server's preference order (best first), by `Accept` and
/// `Accept-Language` (each `None` when the request has no such field): the highest product of
/// type and language weights wins, equal products go to the earlier variant. `None` when no
/// variant is acceptable (`406`, or the server's default variant).
#[must_use]
pub fn choose_variant(
    accept: Option<&[u8]>,
    accept_language: Option<&[u8]>,
    variants: &[Variant<'_>],
) -> Option<usize> {
    // In millionths: the product of two weights in thousandths, never rounded to zero.
    let mut best: Option<(usize, u32)> = None;
    for (index, variant) in variants.iter().enumerate() {
        let score = u32::from(media_type_weight(accept, variant.media_type).thousandths())
            * u32::from(language_weight(accept_language, variant.language).thousandths());
        if score > 0 && best.is_none_or(|(_, top)| score > top) {
            best = Some((index, score));
        }
    }
    best.map(|(index, _)| index)
}

#[cfg(test)]
mod tests;
