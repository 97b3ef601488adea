//! Journal: to be written.
