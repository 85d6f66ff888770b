//! ampd-bench: a load generator that measures web servers the way the Flash, JAWS, AFPA and
//! Abyss papers did.
mod response;
mod rng;
mod workload;
fn main() {}
