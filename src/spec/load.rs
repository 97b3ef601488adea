//! Spec text → [`Spec`] with diagnostics. To be written.
pub struct Diagnostic;
pub enum Format { Toml, Json }
pub struct Loaded;
pub enum Severity { Error, Warning }
pub struct SpecError;
