//! Fleet files (TOML) → [`Fleet`]. To be written.
