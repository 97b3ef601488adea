//! Semantic checks on a parsed spec. To be written.
