//! The scheduler. To be written.
