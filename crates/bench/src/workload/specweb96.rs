//! The SPECweb96 static mix: four size classes requested 35% / 50% / 14% / 1%, nine files per
//! class, in as many directories as the data set needs.
//!
//! Owns: the file set layout (`/specweb/dirNNNNN/classC_I`, the layout of the shared bench
//! document root) and the draw. Must not touch: I/O beyond naming the files.
//! Sources: SPEC, "The Workload for the SPECweb96 Benchmark" (tables 1 and 2); AFPA §4.
//!
//! Departure, on purpose: SPECweb96 weights the nine files of a class unequally; here a file is
//! drawn uniformly within its class and the directory uniformly, as the shared `specweb.lua` of
//! the peer benchmarks does, so that both tools issue the same mix. The class frequencies, which
//! decide the bytes per request, are SPECweb96's.

use super::fileset::FileSpec;
use super::{Resource, Workload};

/// Percent of requests per class (class 0: < 1 KB, 1: 1–10 KB, 2: 10–100 KB, 3: 100 KB–1 MB).
pub const CLASS_PERCENT: [u64; 4] = [35, 50, 14, 1];
pub const FILES_PER_CLASS: u64 = 9;

/// Size of file `index` (0..9) of `class`: (index+1) tenths of 1 KiB × 10^class, rounded down.
#[must_use]
pub fn file_size(class: u32, index: u64) -> u64 {
    (index + 1) * 1024 * 10u64.pow(class) / 10
}

fn relative(directory: u64, class: u32, index: u64) -> String {
    format!("specweb/dir{directory:05}/class{class}_{index}")
}

fn each_file(directories: u64) -> impl Iterator<Item = (u64, u32, u64)> {
    (0..directories).flat_map(|directory| {
        (0..4u32)
            .flat_map(move |class| (0..FILES_PER_CLASS).map(move |index| (directory, class, index)))
    })
}

/// The request stream over `directories` directories (at least one).
#[must_use]
pub fn workload(directories: u64) -> Workload {
    Workload::weighted(
        each_file(directories.max(1))
            .map(|(directory, class, index)| {
                let resource = Resource {
                    path: format!("/{}", relative(directory, class, index)),
                    size: Some(file_size(class, index)),
                };
                // Every file of a class has the class's weight, so the class totals keep the
                // SPECweb96 proportions whatever the number of directories.
                (resource, CLASS_PERCENT[class as usize])
            })
            .collect(),
    )
}

/// The files to create below a document root.
#[must_use]
pub fn files(directories: u64) -> Vec<FileSpec> {
    each_file(directories.max(1))
        .map(|(directory, class, index)| FileSpec {
            relative: relative(directory, class, index).into(),
            size: file_size(class, index),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    #[test]
    fn sizes_match_specweb96_table_2_and_the_shared_docroot() {
        assert_eq!(file_size(0, 0), 102);
        assert_eq!(file_size(0, 8), 921);
        assert_eq!(file_size(1, 0), 1024);
        assert_eq!(file_size(2, 8), 92_160);
        assert_eq!(file_size(3, 8), 921_600);
        let set = files(2);
        assert_eq!(set.len(), 72);
        assert_eq!(set[9].relative.to_str(), Some("specweb/dir00000/class1_0"));
        // About 4.9 MB per directory.
        let bytes: u64 = set.iter().map(|file| file.size).sum();
        assert_eq!(bytes, 2 * 5_119_484);
    }

    /// Over 100,000 draws each class's share is within 0.6 percentage points of SPECweb96's
    /// (at least 3.8 standard deviations for every class); directories and files within a
    /// class are each within 10% of uniform.
    #[test]
    fn class_frequencies_over_100000_draws() {
        let directories = 10;
        let mut workload = workload(directories);
        let mut rng = Rng::new(42);
        let draws = 100_000;
        let mut classes = [0u64; 4];
        let mut per_directory = vec![0u64; directories as usize];
        let mut class1_files = [0u64; 9];
        for _ in 0..draws {
            let index = workload.draw(&mut rng);
            let path = &workload.resources[index].path;
            let class = (path.as_bytes()[path.len() - 3] - b'0') as usize;
            let file = (path.as_bytes()[path.len() - 1] - b'0') as usize;
            let directory: usize = path[12..17].parse().unwrap();
            classes[class] += 1;
            per_directory[directory] += 1;
            if class == 1 {
                class1_files[file] += 1;
            }
        }
        for (class, &percent) in CLASS_PERCENT.iter().enumerate() {
            let share = classes[class] as f64 * 100.0 / draws as f64;
            assert!(
                (share - percent as f64).abs() <= 0.6,
                "class {class}: {share:.2}%"
            );
        }
        let even = draws / directories;
        assert!(per_directory.iter().all(|&n| n.abs_diff(even) < even / 10));
        let even = classes[1] / 9;
        assert!(class1_files.iter().all(|&n| n.abs_diff(even) < even / 10));
    }
}
