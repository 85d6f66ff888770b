//! The WebStone file mix as JAWS used it: 500 B 35%, 5 KB 50%, 50 KB 14%, 5 MB 1%.
//!
//! Owns: the four files, their sizes and weights. Must not touch: I/O beyond naming the files.
//! Sources: JAWS (Hu, Pyarali, Schmidt 1997) §4.2 table 1, after SPEC's file access study.

use super::fileset::FileSpec;
use super::{Resource, Workload};

/// (file name, size in bytes, weight in percent). "KB" is read as 1024 bytes, as WebStone's
/// file set generator did.
pub const FILES: [(&str, u64, u64); 4] = [
    ("file500.bin", 500, 35),
    ("file5k.bin", 5 * 1024, 50),
    ("file50k.bin", 50 * 1024, 14),
    ("file5m.bin", 5 * 1024 * 1024, 1),
];

/// The request stream, paths below `/webstone/`.
#[must_use]
pub fn workload() -> Workload {
    Workload::weighted(
        FILES
            .iter()
            .map(|&(name, size, weight)| {
                let resource = Resource {
                    path: format!("/webstone/{name}"),
                    size: Some(size),
                };
                (resource, weight)
            })
            .collect(),
    )
}

/// The files to create below a document root.
#[must_use]
pub fn files() -> Vec<FileSpec> {
    FILES
        .iter()
        .map(|&(name, size, _)| FileSpec {
            relative: format!("webstone/{name}").into(),
            size,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    /// Over 100,000 draws each file's share is within 0.6 percentage points of table 1 (at
    /// least 3.8 standard deviations for every file, so a correct mix cannot fail by chance).
    #[test]
    fn frequencies_match_jaws_table_1_over_100000_draws() {
        let mut workload = workload();
        let mut rng = Rng::new(42);
        let mut counts = [0u64; 4];
        let draws = 100_000;
        for _ in 0..draws {
            counts[workload.draw(&mut rng)] += 1;
        }
        for (index, &(name, _, percent)) in FILES.iter().enumerate() {
            let share = counts[index] as f64 * 100.0 / draws as f64;
            assert!(
                (share - percent as f64).abs() <= 0.6,
                "{name}: {share:.2}% (want {percent}%)"
            );
        }
        assert_eq!(workload.resources[3].size, Some(5 << 20));
        assert_eq!(files()[0].relative.to_str(), Some("webstone/file500.bin"));
    }
}
