//! Themes: named styles for the views, loaded from `themes/*.toml` (built
//! in with `include_str!`, so they work from any working directory), and
//! mapped to the terminal's colour depth.
//!
//! Owns colour choice only. Selection is always reverse video plus a `>`
//! marker, never colour alone; the monochrome theme (NO_COLOR,
//! `--color=none`) uses no colours at all, so modifiers survive crossterm's
//! NO_COLOR handling. Must not read the environment: [`ColorDepth::detect`]
//! takes the values it needs.

use ratatui::style::{Color, Modifier, Style};
use serde::Deserialize;

/// The built-in themes, by name.
pub const BUILTIN: [(&str, &str); 4] = [
    ("dark", include_str!("../../themes/dark.toml")),
    ("light", include_str!("../../themes/light.toml")),
    ("high-contrast", include_str!("../../themes/high-contrast.toml")),
    ("monochrome", include_str!("../../themes/monochrome.toml")),
];

/// How many colours the terminal shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColorDepth {
    TrueColor,
    Ansi256,
    Ansi16,
    None,
}

impl ColorDepth {
    /// From `--color` (`auto|truecolor|256|16|none`), `NO_COLOR` and
    /// `COLORTERM`/`TERM`.
    pub fn detect(
        flag: &str,
        no_color: bool,
        colorterm: Option<&str>,
        term: Option<&str>,
    ) -> Result<Self, String> {
        Ok(match flag {
            "truecolor" | "24bit" => Self::TrueColor,
            "256" => Self::Ansi256,
            "16" => Self::Ansi16,
            "none" => Self::None,
            "auto" if no_color => Self::None,
            "auto" if matches!(colorterm, Some("truecolor" | "24bit")) => Self::TrueColor,
            "auto" if term.is_some_and(|t| t.contains("256")) => Self::Ansi256,
            "auto" => Self::Ansi16,
            other => return Err(format!("unknown --color {other:?}; one of auto, truecolor, 256, 16, none")),
        })
    }
}

#[derive(Debug, Deserialize)]
struct ThemeFile {
    name: String,
    text: String,
    dim: String,
    accent: String,
    header: String,
    ok: String,
    warn: String,
    bad: String,
    border: String,
}

/// The styles views use.
#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    pub name: String,
    pub text: Style,
    pub dim: Style,
    pub accent: Style,
    pub header: Style,
    pub ok: Style,
    pub warn: Style,
    pub bad: Style,
    pub border: Style,
    pub selected: Style,
    /// The depth its colours were mapped to, which the terminal's backend
    /// also writes them at ([`crate::console::backend::DepthBackend`]).
    pub depth: ColorDepth,
}

impl Theme {
    /// A built-in theme by name at a colour depth. `ColorDepth::None`
    /// always gives the monochrome theme.
    pub fn named(name: &str, depth: ColorDepth) -> Result<Self, String> {
        let name = if depth == ColorDepth::None { "monochrome" } else { name };
        let text = BUILTIN.iter().find(|(n, _)| *n == name).map(|(_, t)| *t).ok_or_else(|| {
            let names: Vec<_> = BUILTIN.iter().map(|(n, _)| *n).collect();
            format!("unknown theme {name:?}; one of {}", names.join(", "))
        })?;
        Self::parse(text, depth)
    }

    /// A theme from TOML text.
    pub fn parse(text: &str, depth: ColorDepth) -> Result<Self, String> {
        let f: ThemeFile = toml::from_str(text).map_err(|e| format!("theme: {}", e.message()))?;
        let c = |s: &str| parse_color(s, depth).map(|c| Style::new().fg(c));
        let mono = depth == ColorDepth::None;
        Ok(Theme {
            name: f.name,
            text: c(&f.text)?,
            dim: if mono { Style::new().add_modifier(Modifier::DIM) } else { c(&f.dim)? },
            accent: c(&f.accent)?,
            header: c(&f.header)?.add_modifier(Modifier::BOLD),
            ok: c(&f.ok)?,
            warn: c(&f.warn)?.add_modifier(Modifier::BOLD),
            bad: c(&f.bad)?.add_modifier(Modifier::BOLD),
            border: c(&f.border)?,
            selected: Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD),
            depth,
        })
    }

    /// The monochrome theme (for tests and NO_COLOR).
    pub fn monochrome() -> Self {
        // The built-in monochrome theme parses: covered by `builtins_parse`.
        Self::named("monochrome", ColorDepth::None).unwrap_or_else(|_| Self::fallback())
    }

    fn fallback() -> Self {
        let s = Style::new();
        Theme {
            name: "fallback".into(),
            text: s,
            dim: s,
            accent: s,
            header: s.add_modifier(Modifier::BOLD),
            ok: s,
            warn: s.add_modifier(Modifier::BOLD),
            bad: s.add_modifier(Modifier::BOLD),
            border: s,
            selected: s.add_modifier(Modifier::REVERSED | Modifier::BOLD),
            depth: ColorDepth::None,
        }
    }
}

fn parse_color(s: &str, depth: ColorDepth) -> Result<Color, String> {
    if depth == ColorDepth::None {
        return Ok(Color::Reset);
    }
    let named = match s {
        "reset" => Some(Color::Reset),
        "black" => Some(Color::Black),
        "red" => Some(Color::Red),
        "green" => Some(Color::Green),
        "yellow" => Some(Color::Yellow),
        "blue" => Some(Color::Blue),
        "magenta" => Some(Color::Magenta),
        "cyan" => Some(Color::Cyan),
        "gray" => Some(Color::Gray),
        "dark-gray" => Some(Color::DarkGray),
        "light-red" => Some(Color::LightRed),
        "light-green" => Some(Color::LightGreen),
        "light-yellow" => Some(Color::LightYellow),
        "light-blue" => Some(Color::LightBlue),
        "light-magenta" => Some(Color::LightMagenta),
        "light-cyan" => Some(Color::LightCyan),
        "white" => Some(Color::White),
        _ => None,
    };
    if let Some(c) = named {
        return Ok(c);
    }
    let hex = s.strip_prefix('#').filter(|h| h.len() == 6).ok_or_else(|| format!("bad colour {s:?}"))?;
    let v = u32::from_str_radix(hex, 16).map_err(|_| format!("bad colour {s:?}"))?;
    let (r, g, b) = ((v >> 16) as u8, (v >> 8) as u8, v as u8);
    Ok(match depth {
        ColorDepth::TrueColor => Color::Rgb(r, g, b),
        ColorDepth::Ansi256 => Color::Indexed(to_256(r, g, b)),
        _ => to_16(r, g, b),
    })
}

/// The nearest colour of the 6×6×6 cube (xterm's levels: 0, 95, 135,
/// 175, 215, 255).
pub(crate) fn to_256(r: u8, g: u8, b: u8) -> u8 {
    let q = |v: u8| match v {
        0..48 => 0,
        48..115 => 1,
        _ => (v - 35) / 40,
    };
    16 + 36 * q(r) + 6 * q(g) + q(b)
}

/// The nearest of the 16 ANSI colours, so the user's palette applies.
pub(crate) fn to_16(r: u8, g: u8, b: u8) -> Color {
    let bright = r.max(g).max(b) > 170;
    let on = |v: u8| v > 85;
    match (on(r), on(g), on(b), bright) {
        (false, false, false, _) => Color::Black,
        (true, false, false, false) => Color::Red,
        (true, false, false, true) => Color::LightRed,
        (false, true, false, false) => Color::Green,
        (false, true, false, true) => Color::LightGreen,
        (true, true, false, false) => Color::Yellow,
        (true, true, false, true) => Color::LightYellow,
        (false, false, true, false) => Color::Blue,
        (false, false, true, true) => Color::LightBlue,
        (true, false, true, _) => Color::Magenta,
        (false, true, true, _) => Color::Cyan,
        (true, true, true, false) => Color::Gray,
        (true, true, true, true) => Color::White,
    }
}

impl Theme {
    /// A workload's state word with a symbol, so it reads without colour.
    pub fn state_span(&self, s: crate::engine::model::WorkloadState) -> ratatui::text::Span<'static> {
        use crate::engine::model::WorkloadState as W;
        let (sym, style) = match s {
            W::Succeeded => ("✓", self.ok),
            W::Failed => ("✗", self.bad),
            W::Cancelled => ("⊘", self.dim),
            W::Running => ("▶", self.accent),
            W::Queued => ("…", self.warn),
            W::Placing | W::Launching => ("↑", self.text),
        };
        ratatui::text::Span::styled(format!("{sym} {s}"), style)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse_at_every_depth() {
        for (name, _) in BUILTIN {
            for d in [ColorDepth::TrueColor, ColorDepth::Ansi256, ColorDepth::Ansi16, ColorDepth::None] {
                Theme::named(name, d).unwrap();
            }
        }
    }

    #[test]
    fn depth_follows_flag_no_color_and_colorterm() {
        assert_eq!(ColorDepth::detect("auto", true, Some("truecolor"), None).unwrap(), ColorDepth::None);
        assert_eq!(
            ColorDepth::detect("auto", false, Some("truecolor"), None).unwrap(),
            ColorDepth::TrueColor
        );
        assert_eq!(
            ColorDepth::detect("auto", false, None, Some("tmux-256color")).unwrap(),
            ColorDepth::Ansi256
        );
        assert_eq!(ColorDepth::detect("16", false, Some("truecolor"), None).unwrap(), ColorDepth::Ansi16);
        assert!(ColorDepth::detect("rainbow", false, None, None).is_err());
    }

    #[test]
    fn no_color_means_no_colour_anywhere() {
        let t = Theme::named("dark", ColorDepth::None).unwrap();
        assert_eq!(t.name, "monochrome");
        for s in [t.text, t.accent, t.ok, t.bad, t.selected] {
            assert!(s.fg.is_none() || s.fg == Some(Color::Reset));
        }
        assert!(t.selected.add_modifier.contains(Modifier::REVERSED));
    }

    /// WCAG's contrast ratio of two colours (1 to 21).
    fn contrast(a: (u8, u8, u8), b: (u8, u8, u8)) -> f64 {
        let lum = |(r, g, b): (u8, u8, u8)| {
            let lin = |v: u8| {
                let c = f64::from(v) / 255.0;
                if c <= 0.03928 { c / 12.92 } else { ((c + 0.055) / 1.055).powf(2.4) }
            };
            0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b)
        };
        let (x, y) = (lum(a), lum(b));
        (x.max(y) + 0.05) / (x.min(y) + 0.05)
    }

    #[test]
    fn the_light_themes_borders_show_on_white() {
        use crate::console::backend::{at_depth, rgb};
        const WHITE: (u8, u8, u8) = (255, 255, 255);
        for d in [ColorDepth::TrueColor, ColorDepth::Ansi256, ColorDepth::Ansi16] {
            let t = Theme::named("light", d).unwrap();
            // As the terminal is sent it; named colours as xterm shows them.
            let border = t.border.fg.map(|c| at_depth(c, d)).and_then(rgb).expect("a border colour");
            let ratio = contrast(border, WHITE);
            assert!(ratio >= 3.0, "{d:?}: border {border:?} on white is only {ratio:.2}:1");
            // Text in truecolor, where the theme's own colours show as given.
            if d == ColorDepth::TrueColor {
                for (what, s) in
                    [("text", t.text), ("dim", t.dim), ("ok", t.ok), ("warn", t.warn), ("bad", t.bad)]
                {
                    let c = s.fg.and_then(rgb).expect("a colour");
                    assert!(contrast(c, WHITE) >= 3.0, "{what} {c:?} on white");
                }
            }
        }
        // The old border, the light grey of ANSI 7, was not.
        assert!(contrast(rgb(Color::Gray).unwrap(), WHITE) < 1.5);
    }

    #[test]
    fn rgb_maps_down() {
        let t = Theme::named("light", ColorDepth::Ansi256).unwrap();
        assert!(matches!(t.ok.fg, Some(Color::Indexed(_))));
        let t = Theme::named("light", ColorDepth::Ansi16).unwrap();
        assert!(matches!(t.ok.fg, Some(Color::Green | Color::LightGreen)));
    }
}
