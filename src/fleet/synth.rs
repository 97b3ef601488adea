//! Synthetic fleets for benchmarks and tests. To be written.
