//! Workloads: which requests the simulated clients send, and in what proportions or order.
//!
//! Owns: the request streams of the paper experiments (one file; a sweep of file sizes; the
//! SPECweb96 and WebStone mixes; a replayed access log), and creating the files they name.
//! Must not touch: sockets and timing (the client loop asks [`Workload::draw`] for the next
//! request and sends it). Every stream is a pure function of the workload and a seed, so each
//! server in a comparison sees the same sequence and tests can count 100,000 draws.
//!
//! Sources: Flash (Pai et al. 1999) §6.1 single-file test, §6.2 trace replay truncated to a data
//! set size; JAWS (Hu et al. 1997) table 1 (WebStone mix); AFPA (Joubert et al. 2001) §4
//! (SPECweb96, fixed sizes 64 B to 1 MB); SPEC's SPECweb96 workload description.

pub mod fileset;
pub mod replay;
pub mod specweb96;
pub mod webstone;

use crate::rng::Rng;

/// One distinct request a workload issues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    /// The request target, starting with `/`.
    pub path: String,
    /// The body length a correct server returns, when the workload knows it.
    pub size: Option<u64>,
}

/// How the next resource is chosen.
#[derive(Debug, Clone)]
pub enum Picker {
    /// Always the first resource (the single-file tests).
    Fixed,
    /// Independent draws; `cumulative[i]` is the sum of the weights of resources `0..=i`.
    Weighted { cumulative: Vec<u64> },
    /// The resources in this order, again from the start after the last (a replayed log).
    Sequence { order: Vec<u32>, next: usize },
}

/// A request stream: the resources and how to pick among them.
#[derive(Debug, Clone)]
pub struct Workload {
    pub resources: Vec<Resource>,
    pub picker: Picker,
}

impl Workload {
    /// One fixed resource.
    #[must_use]
    pub fn single(path: &str, size: Option<u64>) -> Workload {
        Workload {
            resources: vec![Resource {
                path: path.to_owned(),
                size,
            }],
            picker: Picker::Fixed,
        }
    }

    /// Resources drawn independently with the given integer weights.
    #[must_use]
    pub fn weighted(weighted: Vec<(Resource, u64)>) -> Workload {
        let mut total = 0;
        let mut cumulative = Vec::with_capacity(weighted.len());
        let mut resources = Vec::with_capacity(weighted.len());
        for (resource, weight) in weighted {
            total += weight;
            cumulative.push(total);
            resources.push(resource);
        }
        Workload {
            resources,
            picker: Picker::Weighted { cumulative },
        }
    }

    /// The index of the next resource to request.
    pub fn draw(&mut self, rng: &mut Rng) -> usize {
        match &mut self.picker {
            Picker::Fixed => 0,
            Picker::Weighted { cumulative } => {
                let total = cumulative.last().copied().unwrap_or(1);
                let ticket = rng.below(total);
                cumulative.partition_point(|&bound| bound <= ticket)
            }
            Picker::Sequence { order, next } => {
                let index = order[*next] as usize;
                *next = (*next + 1) % order.len();
                index
            }
        }
    }

    /// Prefixes every path with `prefix` (the path part of a target URL, without a final `/`).
    pub fn prefix_paths(&mut self, prefix: &str) {
        let prefix = prefix.trim_end_matches('/');
        if prefix.is_empty() {
            return;
        }
        for resource in &mut self.resources {
            resource.path = format!("{prefix}{}", resource.path);
        }
    }

    /// Forgets the expected sizes (when replaying against content that may differ).
    pub fn forget_sizes(&mut self) {
        for resource in &mut self.resources {
            resource.size = None;
        }
    }
}

/// Parses a byte count: a number with an optional binary suffix `k`, `m` or `g` (any case,
/// with or without a trailing `b`/`ib`): `64`, `1k` (1024), `10m`, `1GiB`.
///
/// # Errors
/// A message naming the text when it is not such a count.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let lower = text.trim().to_ascii_lowercase();
    let number_end = lower
        .find(|character: char| !character.is_ascii_digit())
        .unwrap_or(lower.len());
    let (digits, suffix) = lower.split_at(number_end);
    let multiplier: u64 = match suffix {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(format!("'{text}' is not a size (use e.g. 64, 1k, 10m)")),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|value| value.checked_mul(multiplier))
        .ok_or_else(|| format!("'{text}' is not a size (use e.g. 64, 1k, 10m)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_size("64"), Ok(64));
        assert_eq!(parse_size("1k"), Ok(1024));
        assert_eq!(parse_size("10M"), Ok(10 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert!(parse_size("ten").is_err());
        assert!(parse_size("5x").is_err());
        assert!(parse_size("").is_err());
    }

    #[test]
    fn weighted_draws_follow_weights_and_sequence_loops() {
        let resource = |path: &str| Resource {
            path: path.into(),
            size: None,
        };
        let mut workload = Workload::weighted(vec![(resource("/a"), 1), (resource("/b"), 3)]);
        let mut rng = Rng::new(1);
        let draws = 100_000;
        let b = (0..draws).filter(|_| workload.draw(&mut rng) == 1).count();
        // 75% within half a percentage point.
        assert!((74_500..75_500).contains(&b), "{b}");
        let mut sequence = Workload {
            resources: vec![resource("/x"), resource("/y")],
            picker: Picker::Sequence {
                order: vec![1, 0, 1],
                next: 0,
            },
        };
        let drawn: Vec<_> = (0..5).map(|_| sequence.draw(&mut rng)).collect();
        assert_eq!(drawn, [1, 0, 1, 1, 0]);
        sequence.prefix_paths("/base/");
        assert_eq!(sequence.resources[0].path, "/base/x");
    }
}
