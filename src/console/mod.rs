//! The operator console: a read model of what the engine reports, plus
//! views of it, driven by keys.
//!
//! - [`model`]: the read model, built only from engine updates.
//! - [`app`]: state and `update(msg) -> effects` (pure); each view with
//!   state and keys of its own has a [`component`] ([`detail`], [`logs`],
//!   [`spec_view`], [`events`]), which the app hands its keys first.
//! - [`action`]: the one place that sends commands; read-only and
//!   confirmation live there.
//! - [`msg`]: the views, messages and effects every module shares.
//! - [`keymap`]: keys → intents; [`help`] makes the `?` help from it.
//! - [`views`]: drawing only; [`fit`] fits their text into columns.
//! - [`run`]: the terminal, the event loop and the effects (the only I/O);
//!   [`backend`] writes colours at the depth `--color` chose.
//! - [`replay`]: `canopy sim --watch`: paces a simulation into the same
//!   read model, in virtual time.
//! - [`audit`], [`tenants`], [`usage`]: what the audit, tenants and usage views load from
//!   the engine, and when.
//!
//! The console never talks to providers or the database: the engine
//! handle is its only source and sink.

pub mod action;
pub mod app;
pub mod audit;
pub mod backend;
pub mod component;
mod derive;
pub mod detail;
pub mod editor;
pub mod events;
pub mod filter;
pub mod fit;
pub mod fixture;
pub mod help;
pub mod keymap;
pub mod logs;
pub mod model;
pub mod msg;
pub mod poll;
pub mod replay;
pub mod run;
pub mod spec_view;
pub mod tenants;
pub mod theme;
pub mod usage;
pub mod views;

pub use app::{App, Config, Effect, Msg, View};
pub use model::Model;
