//! A site's or location's `error_pages`: which local URI answers a status ampd (or, with
//! `intercept_errors`, an upstream) would answer with an error, and with which status (nginx
//! `error_page 404 /404.html`, `error_page 403 =200 /denied.html`).
//!
//! Owns: the table as the request path asks it (`ErrorPages::find`: an exact status before its
//! class). Must not touch: reading it (`error_page_keys.rs`), routing to a page
//! (`conn::error_pages`).

/// What answers one status: a local URI (a path from `/`, maybe with a query), routed inside
/// ampd as a `GET`, and the status to answer with (`None`: the original one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorPage {
    pub uri: String,
    pub status: Option<u16>,
}

/// The statuses (300–599) a block lists, and the classes `4xx` and `5xx`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ErrorPages {
    /// Sorted by status.
    exact: Vec<(u16, ErrorPage)>,
    client_errors: Option<ErrorPage>,
    server_errors: Option<ErrorPage>,
}

/// A key of the table: one status, or a class of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKey {
    Status(u16),
    /// `4xx`.
    ClientErrors,
    /// `5xx`.
    ServerErrors,
}

impl ErrorKey {
    /// `"404"` (300 to 599), `"4xx"` or `"5xx"` (either case).
    #[must_use]
    pub fn parse(text: &str) -> Option<ErrorKey> {
        if text.eq_ignore_ascii_case("4xx") {
            return Some(ErrorKey::ClientErrors);
        }
        if text.eq_ignore_ascii_case("5xx") {
            return Some(ErrorKey::ServerErrors);
        }
        if text.len() != 3 || !text.bytes().all(|byte| byte.is_ascii_digit()) {
            return None;
        }
        text.parse::<u16>()
            .ok()
            .filter(|status| (300..=599).contains(status))
            .map(ErrorKey::Status)
    }
}

impl ErrorPages {
    /// Add (or replace) what answers `key`.
    pub fn insert(&mut self, key: ErrorKey, page: ErrorPage) {
        match key {
            ErrorKey::ClientErrors => self.client_errors = Some(page),
            ErrorKey::ServerErrors => self.server_errors = Some(page),
            ErrorKey::Status(status) => {
                match self
                    .exact
                    .binary_search_by_key(&status, |(listed, _)| *listed)
                {
                    Ok(at) => self.exact[at].1 = page,
                    Err(at) => self.exact.insert(at, (status, page)),
                }
            }
        }
    }

    /// The page for `status`: its own entry, else its class's.
    #[must_use]
    pub fn find(&self, status: u16) -> Option<&ErrorPage> {
        if let Ok(at) = self
            .exact
            .binary_search_by_key(&status, |(listed, _)| *listed)
        {
            return Some(&self.exact[at].1);
        }
        match status {
            400..=499 => self.client_errors.as_ref(),
            500..=599 => self.server_errors.as_ref(),
            _ => None,
        }
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.client_errors.is_none() && self.server_errors.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(uri: &str) -> ErrorPage {
        ErrorPage {
            uri: uri.to_owned(),
            status: None,
        }
    }

    #[test]
    fn an_exact_status_wins_over_its_class() {
        let mut pages = ErrorPages::default();
        pages.insert(ErrorKey::ClientErrors, page("/4xx.html"));
        pages.insert(ErrorKey::Status(404), page("/404.html"));
        pages.insert(ErrorKey::Status(301), page("/moved.html"));
        assert_eq!(pages.find(404).unwrap().uri, "/404.html");
        assert_eq!(pages.find(403).unwrap().uri, "/4xx.html");
        assert_eq!(pages.find(301).unwrap().uri, "/moved.html");
        assert!(pages.find(302).is_none() && pages.find(502).is_none());
        assert!(pages.find(200).is_none());
    }

    #[test]
    fn keys_are_statuses_from_300_to_599_or_a_class() {
        assert_eq!(ErrorKey::parse("404"), Some(ErrorKey::Status(404)));
        assert_eq!(ErrorKey::parse("5XX"), Some(ErrorKey::ServerErrors));
        for bad in ["200", "600", "4xz", "+404", "0404", "", "3xx"] {
            assert_eq!(ErrorKey::parse(bad), None, "{bad}");
        }
    }
}
