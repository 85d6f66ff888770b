//! The ACME conversation (RFC 8555 §7): the directory, nonces (retrying once more on
//! `badNonce`, §6.5), the account, orders, authorizations, challenges, finalization and the
//! certificate's download. Every request after the directory is a signed POST (§6.2; POST-as-GET
//! for reads, §6.3).
//!
//! Owns: requests and the JSON they carry. Must not touch: the order of the steps and waiting
//! (`order`), files (`store`).

use serde_json::{json, Value};

use super::error::{AcmeError, Problem, Step};
use super::https::{Https, Response};
use super::jws::{AccountKey, Signer};

/// How often one request is sent again after `badNonce` (each time with the fresh nonce the
/// refusal carried).
const NONCE_RETRIES: usize = 5;

const JOSE: &str = "application/jose+json";
const BAD_NONCE: &str = "urn:ietf:params:acme:error:badNonce";

/// The directory's URLs (RFC 8555 §7.1.1).
#[derive(Debug)]
struct Directory {
    new_nonce: String,
    new_account: String,
    new_order: String,
}

/// An order (§7.1.3), with its URL.
#[derive(Debug)]
pub struct Order {
    pub url: String,
    pub status: String,
    pub authorizations: Vec<String>,
    pub finalize: String,
    pub certificate: Option<String>,
    pub error: Option<Problem>,
}

/// An authorization (§7.1.4): its name, status and challenges.
#[derive(Debug)]
pub struct Authorization {
    pub name: String,
    pub wildcard: bool,
    pub status: String,
    pub challenges: Vec<Challenge>,
}

#[derive(Debug)]
pub struct Challenge {
    pub kind: String,
    pub url: String,
    pub token: String,
    pub error: Option<Problem>,
}

/// A session with one ACME server as one account.
pub struct Client {
    https: Https,
    directory: Directory,
    key: AccountKey,
    account: Option<String>,
    nonce: Option<String>,
}

/// The problem document of a refusal, or what can be said without one.
fn problem_of(response: &Response) -> Problem {
    let parsed: Option<Value> = serde_json::from_slice(&response.body).ok();
    let field = |name: &str| {
        parsed
            .as_ref()
            .and_then(|value| value.get(name))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    Problem {
        kind: field("type").unwrap_or_else(|| format!("HTTP {}", response.status)),
        detail: field("detail").unwrap_or_else(|| {
            String::from_utf8_lossy(&response.body)
                .chars()
                .take(200)
                .collect()
        }),
    }
}

fn problem_in(value: &Value) -> Option<Problem> {
    let error = value.get("error")?;
    Some(Problem {
        kind: error.get("type")?.as_str()?.to_owned(),
        detail: error
            .get("detail")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
    })
}

fn text(value: &Value, name: &str, step: Step) -> Result<String, AcmeError> {
    value
        .get(name)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| AcmeError::Protocol {
            step,
            reason: format!("the response has no \"{name}\""),
        })
}

fn json_of(response: &Response, step: Step) -> Result<Value, AcmeError> {
    serde_json::from_slice(&response.body).map_err(|error| AcmeError::Protocol {
        step,
        reason: format!("the response is not JSON: {error}"),
    })
}

impl Client {
    /// Read the directory at `url`.
    ///
    /// # Errors
    /// It cannot be fetched or lacks a URL this client needs.
    pub fn connect(https: Https, url: &str, key: AccountKey) -> Result<Client, AcmeError> {
        let step = Step::Directory;
        let response = https.get(url).map_err(|error| AcmeError::Transport {
            step,
            url: url.to_owned(),
            reason: error.to_string(),
        })?;
        if response.status != 200 {
            return Err(AcmeError::Refused {
                step,
                status: response.status,
                problem: problem_of(&response),
            });
        }
        let value = json_of(&response, step)?;
        Ok(Client {
            https,
            directory: Directory {
                new_nonce: text(&value, "newNonce", step)?,
                new_account: text(&value, "newAccount", step)?,
                new_order: text(&value, "newOrder", step)?,
            },
            key,
            account: None,
            nonce: None,
        })
    }

    #[must_use]
    pub fn key(&self) -> &AccountKey {
        &self.key
    }

    /// A fresh nonce: the last response's, else one from `newNonce` (§7.2).
    fn nonce(&mut self) -> Result<String, AcmeError> {
        if let Some(nonce) = self.nonce.take() {
            return Ok(nonce);
        }
        let step = Step::Nonce;
        let url = &self.directory.new_nonce;
        let response = self.https.get(url).map_err(|error| AcmeError::Transport {
            step,
            url: url.clone(),
            reason: error.to_string(),
        })?;
        match response.header("replay-nonce") {
            Some(nonce) if response.status < 300 => Ok(nonce.to_owned()),
            _ => Err(AcmeError::Refused {
                step,
                status: response.status,
                problem: problem_of(&response),
            }),
        }
    }

    /// A signed POST of `payload` (`None`: POST-as-GET) to `url`, sent again with a new nonce
    /// on `badNonce`. Returns a successful response; a refusal becomes `Refused`.
    fn post(
        &mut self,
        step: Step,
        url: &str,
        payload: Option<&Value>,
    ) -> Result<Response, AcmeError> {
        let mut attempts = 0;
        loop {
            attempts += 1;
            let nonce = self.nonce()?;
            let signer = self.account.as_deref().map_or(Signer::Jwk, Signer::Kid);
            let body = self
                .key
                .sign(signer, &nonce, url, payload)
                .map_err(AcmeError::Crypto)?;
            let response =
                self.https
                    .post(url, JOSE, &body)
                    .map_err(|error| AcmeError::Transport {
                        step,
                        url: url.to_owned(),
                        reason: error.to_string(),
                    })?;
            self.nonce = response.header("replay-nonce").map(str::to_owned);
            if response.status < 400 {
                return Ok(response);
            }
            let problem = problem_of(&response);
            if problem.kind == BAD_NONCE && attempts <= NONCE_RETRIES {
                continue;
            }
            return Err(AcmeError::Refused {
                step,
                status: response.status,
                problem,
            });
        }
    }

    /// Find or create the account of this key (§7.3), agreeing to the terms of service.
    ///
    /// # Errors
    /// The server refused.
    pub fn account(&mut self, email: Option<&str>) -> Result<(), AcmeError> {
        let step = Step::Account;
        let mut payload = json!({ "termsOfServiceAgreed": true });
        if let Some(email) = email {
            payload["contact"] = json!([format!("mailto:{email}")]);
        }
        let url = self.directory.new_account.clone();
        let response = self.post(step, &url, Some(&payload))?;
        let account = response
            .header("location")
            .ok_or_else(|| AcmeError::Protocol {
                step,
                reason: "the account has no Location".to_owned(),
            })?;
        self.account = Some(account.to_owned());
        Ok(())
    }

    /// A new order for `names` (§7.4).
    ///
    /// # Errors
    /// The server refused.
    pub fn new_order(&mut self, names: &[String]) -> Result<Order, AcmeError> {
        let step = Step::Order;
        let identifiers: Vec<Value> = names
            .iter()
            .map(|name| json!({ "type": "dns", "value": name }))
            .collect();
        let url = self.directory.new_order.clone();
        let response = self.post(step, &url, Some(&json!({ "identifiers": identifiers })))?;
        let location = response
            .header("location")
            .ok_or_else(|| AcmeError::Protocol {
                step,
                reason: "the order has no Location".to_owned(),
            })?
            .to_owned();
        order_of(location, &json_of(&response, step)?, step)
    }

    /// The order at `url` again (POST-as-GET), and its `Retry-After` in seconds.
    ///
    /// # Errors
    /// The server refused.
    pub fn order(&mut self, url: &str, step: Step) -> Result<(Order, Option<u64>), AcmeError> {
        let response = self.post(step, url, None)?;
        let order = order_of(url.to_owned(), &json_of(&response, step)?, step)?;
        Ok((order, retry_after(&response)))
    }

    /// The authorization at `url`, and its `Retry-After` in seconds.
    ///
    /// # Errors
    /// The server refused.
    pub fn authorization(&mut self, url: &str) -> Result<(Authorization, Option<u64>), AcmeError> {
        let step = Step::Authorization;
        let response = self.post(step, url, None)?;
        let value = json_of(&response, step)?;
        let name = value
            .get("identifier")
            .map(|identifier| text(identifier, "value", step))
            .transpose()?
            .unwrap_or_default();
        let challenges = value
            .get("challenges")
            .and_then(Value::as_array)
            .map(|challenges| {
                challenges
                    .iter()
                    .filter_map(|challenge| {
                        Some(Challenge {
                            kind: challenge.get("type")?.as_str()?.to_owned(),
                            url: challenge.get("url")?.as_str()?.to_owned(),
                            token: challenge
                                .get("token")
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                                .to_owned(),
                            error: problem_in(challenge),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        let authorization = Authorization {
            name,
            wildcard: value.get("wildcard").and_then(Value::as_bool) == Some(true),
            status: text(&value, "status", step)?,
            challenges,
        };
        Ok((authorization, retry_after(&response)))
    }

    /// Tell the server the challenge at `url` is ready to be validated (§7.5.1).
    ///
    /// # Errors
    /// The server refused.
    pub fn respond(&mut self, url: &str) -> Result<(), AcmeError> {
        self.post(Step::Challenge, url, Some(&json!({}))).map(drop)
    }

    /// Send the CSR (DER) to the order's `finalize` URL (§7.4).
    ///
    /// # Errors
    /// The server refused.
    pub fn finalize(&mut self, order: &Order, csr: &[u8]) -> Result<(), AcmeError> {
        let payload = json!({ "csr": super::jws::base64url(csr) });
        self.post(Step::Finalize, &order.finalize, Some(&payload))
            .map(drop)
    }

    /// The certificate chain at `url`, PEM (`application/pem-certificate-chain`, §7.4.2).
    ///
    /// # Errors
    /// The server refused, or the answer is not PEM.
    pub fn download(&mut self, url: &str) -> Result<String, AcmeError> {
        let step = Step::Download;
        let response = self.post(step, url, None)?;
        let chain = String::from_utf8(response.body).unwrap_or_default();
        if !chain.contains("-----BEGIN CERTIFICATE-----") {
            return Err(AcmeError::Protocol {
                step,
                reason: "the certificate is not a PEM chain".to_owned(),
            });
        }
        Ok(chain)
    }
}

fn order_of(url: String, value: &Value, step: Step) -> Result<Order, AcmeError> {
    Ok(Order {
        url,
        status: text(value, "status", step)?,
        authorizations: value
            .get("authorizations")
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
        finalize: text(value, "finalize", step)?,
        certificate: value
            .get("certificate")
            .and_then(Value::as_str)
            .map(str::to_owned),
        error: problem_in(value),
    })
}

/// `Retry-After` in seconds (RFC 9110 §10.2.3; the HTTP-date form is read as "soon").
fn retry_after(response: &Response) -> Option<u64> {
    response
        .header("retry-after")
        .map(|value| value.trim().parse().unwrap_or(1))
}

#[cfg(test)]
mod tests {
    use super::{problem_of, Response};

    #[test]
    fn problem_documents_name_type_and_detail() {
        let response = Response {
            status: 400,
            headers: Vec::new(),
            body: br#"{"type":"urn:ietf:params:acme:error:rejectedIdentifier","detail":"no"}"#
                .to_vec(),
        };
        let problem = problem_of(&response);
        assert_eq!(
            problem.kind,
            "urn:ietf:params:acme:error:rejectedIdentifier"
        );
        assert_eq!(problem.detail, "no");
        let bare = Response {
            status: 502,
            headers: Vec::new(),
            body: b"bad gateway".to_vec(),
        };
        assert_eq!(problem_of(&bare).to_string(), "HTTP 502: bad gateway");
    }
}
