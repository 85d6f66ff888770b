//! A small, seeded pseudo-random generator (xoshiro256**), so every server in a comparison sees
//! the same request sequence and a test's 100,000 draws are reproducible.
//!
//! Owns: random numbers for workload draws and file contents. Must not touch: anything
//! security-related (this is not a cryptographic generator).
//! Sources: Blackman and Vigna, "Scrambled linear pseudorandom number generators" (2018).

#[derive(Debug, Clone)]
pub struct Rng {
    state: [u64; 4],
}

impl Rng {
    /// A generator whose whole sequence is fixed by `seed` (seeded through splitmix64, as the
    /// xoshiro authors recommend, so nearby seeds give unrelated sequences).
    #[must_use]
    pub fn new(seed: u64) -> Rng {
        let mut mix = seed;
        let mut next = || {
            mix = mix.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = mix;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        Rng {
            state: [next(), next(), next(), next()],
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        let [s0, s1, s2, s3] = self.state;
        let result = s1.wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s1 << 17;
        let mut state = [s0, s1, s2 ^ s0, s3 ^ s1];
        state[1] ^= state[2];
        state[0] ^= state[3];
        state[2] ^= t;
        state[3] = state[3].rotate_left(45);
        self.state = state;
        result
    }

    /// A uniform integer in `0..bound` (`bound` > 0), without modulo bias (Lemire's method).
    pub fn below(&mut self, bound: u64) -> u64 {
        debug_assert!(bound > 0);
        let mut product = u128::from(self.next_u64()) * u128::from(bound);
        let threshold = bound.wrapping_neg() % bound;
        while (product as u64) < threshold {
            product = u128::from(self.next_u64()) * u128::from(bound);
        }
        (product >> 64) as u64
    }

    pub fn fill(&mut self, bytes: &mut [u8]) {
        for chunk in bytes.chunks_mut(8) {
            let word = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence_and_below_stays_in_range() {
        let mut first = Rng::new(7);
        let mut second = Rng::new(7);
        let mut counts = [0u32; 10];
        for _ in 0..10_000 {
            let value = first.below(10);
            assert_eq!(value, second.below(10));
            counts[value as usize] += 1;
        }
        // Each of ten values about 1,000 times (±15%).
        assert!(
            counts.iter().all(|&count| (850..1150).contains(&count)),
            "{counts:?}"
        );
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
    }
}
