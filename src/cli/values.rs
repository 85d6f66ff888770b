//! Reading one command-line value: addresses, sizes and durations (with the configuration
//! file's parsers, `config::parse_listen`, `parse_size`, `parse_duration`), counts, engine and log
//! names, header lines and location paths. Each returns the value or a message that clap
//! prints after "invalid value 'X' for '--flag'".
//!
//! Owns: these pure functions. Must not touch: `Config` (that is `serve.rs`'s).

use std::time::Duration;

use ampd::config::{self, Arch, HelperMode, Level, ListenAddress, LogFormat};

/// An address to listen on, in every form the configuration file's `listen` takes.
pub fn listen(text: &str) -> Result<ListenAddress, String> {
    config::parse_listen(text)
        .map_err(|reason| format!("{reason}; write it like {}", config::LISTEN_FORMS))
}

/// Bytes: `65536`, `64KiB`, `1MiB`, `2G` (as in the configuration file; `10MB` is refused with
/// the binary spelling).
pub fn size(text: &str) -> Result<u64, String> {
    config::parse_size(text).ok_or_else(|| format!("not a size: {}", config::size_hint(text)))
}

/// More than zero: `500ms`, `30s`, `5m`, `1h`, `1d` (as in the configuration file), or a
/// number of seconds, which may have a fraction (`0.5`).
pub fn duration(text: &str) -> Result<Duration, String> {
    let parsed = config::parse_duration(text).or_else(|| {
        text.trim()
            .parse::<f64>()
            .ok()
            .filter(|seconds| seconds.is_finite() && *seconds >= 0.0)
            .map(Duration::from_secs_f64)
    });
    match parsed {
        Some(duration) if !duration.is_zero() => Ok(duration),
        Some(_) => Err("must be more than zero".to_owned()),
        None => Err("not a duration: seconds (0.5), or 500ms, 30s, 5m, 1h, 1d".to_owned()),
    }
}

/// A whole number above zero.
pub fn positive(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(value) if value > 0 => Ok(value),
        _ => Err("not a whole number above zero".to_owned()),
    }
}

pub fn arch(text: &str) -> Result<Arch, String> {
    Arch::from_name(text).ok_or_else(|| {
        let names: Vec<&str> = Arch::ALL.iter().map(|arch| arch.name()).collect();
        format!("unknown engine (one of: {})", names.join(", "))
    })
}

pub fn helper_mode(text: &str) -> Result<HelperMode, String> {
    HelperMode::from_name(text).ok_or_else(|| "one of: threads, process".to_owned())
}

pub fn level(text: &str) -> Result<Level, String> {
    match text {
        "error" => Ok(Level::Error),
        "warn" => Ok(Level::Warn),
        "info" => Ok(Level::Info),
        "debug" => Ok(Level::Debug),
        _ => Err("one of: error, warn, info, debug".to_owned()),
    }
}

pub fn log_format(text: &str) -> Result<LogFormat, String> {
    match text {
        "common" => Ok(LogFormat::Common),
        "combined" => Ok(LogFormat::Combined),
        "json" => Ok(LogFormat::Json),
        _ => Err("one of: common, combined, json".to_owned()),
    }
}

/// `Name: value` (curl's `-H`): a token name (RFC 9110 §5.6.2), a value without line breaks,
/// spaces around it dropped.
pub fn header(text: &str) -> Result<(String, String), String> {
    let (name, value) = ampd_http::head::field_line(text.as_bytes()).map_err(|fault| {
        use ampd_http::head::FieldLineError;
        match fault {
            FieldLineError::MissingColon => "not a header: 'Name: value'".to_owned(),
            FieldLineError::BareCr | FieldLineError::BadValue => {
                "the value has a line break or a control character".to_owned()
            }
            _ => format!(
                "'{}' is not a header name",
                text.split(':').next().unwrap_or(text)
            ),
        }
    })?;
    // A field line is already without CR; a value never holds LF on the command line either.
    let value = std::str::from_utf8(value).map_err(|_| "the value is not UTF-8".to_owned())?;
    Ok((name.to_owned(), value.to_owned()))
}

/// The exact path of a status or health location: `/metrics`, not `/` (the files' own).
pub fn location_path(text: &str) -> Result<String, String> {
    if !text.starts_with('/') || text == "/" {
        return Err("a path below /, like /status".to_owned());
    }
    if text
        .bytes()
        .any(|byte| byte <= b' ' || byte == 0x7f || byte == b'?' || byte == b'#')
    {
        return Err("a path has no spaces, control characters, '?' or '#'".to_owned());
    }
    Ok(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_durations_take_the_files_units() {
        assert_eq!(size("64KiB"), Ok(64 << 10));
        assert_eq!(size("65536"), Ok(65536));
        assert!(size("1 parsec").is_err());
        assert_eq!(duration("20s"), Ok(Duration::from_secs(20)));
        assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(duration("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("20"), Ok(Duration::from_secs(20)));
        for bad in ["0", "0s", "-1", "soon", "NaN", "inf"] {
            assert!(duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn headers_and_paths() {
        assert_eq!(
            header("X-Frame-Options:  DENY "),
            Ok(("X-Frame-Options".to_owned(), "DENY".to_owned()))
        );
        assert_eq!(
            header("X-Empty:"),
            Ok(("X-Empty".to_owned(), String::new()))
        );
        for bad in ["NoColon", "Bad Name: x", ": x", "X: a\r\nInjected: 1"] {
            assert!(header(bad).is_err(), "{bad:?}");
        }
        assert_eq!(location_path("/status"), Ok("/status".to_owned()));
        for bad in ["status", "/", "/a b", "/a?b"] {
            assert!(location_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn names() {
        assert_eq!(arch("mp"), Ok(Arch::Mp));
        assert!(arch("bogus").unwrap_err().contains("reactor"));
        assert_eq!(helper_mode("process"), Ok(HelperMode::Processes));
        assert_eq!(level("warn"), Ok(Level::Warn));
        assert_eq!(log_format("json"), Ok(LogFormat::Json));
        assert!(positive("0").is_err() && positive("zero").is_err());
        assert_eq!(positive("4"), Ok(4));
    }
}
