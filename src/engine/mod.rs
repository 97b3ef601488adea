//! The engine: a pure core that decides, and a shell that acts.
pub mod model;
