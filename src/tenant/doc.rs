//! The tenant and flavor tables as one document: what canopy.toml holds,
//! what `PUT /v1/tenants` takes (JSON or TOML), and what the journal keeps
//! as the tenancy in force; and the rule for which version wins at start.

use super::config::{FlavorDef, Tenancy, TenancyError, TenantDef};
use serde::{Deserialize, Serialize};

/// `default_tenant`, `[[tenant]]`, `[[flavor]]`, `[fair_share]` and
/// `[[budget]]`, as written.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TenancyDoc {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_tenant: Option<String>,
    #[serde(default)]
    pub tenant: Vec<TenantDef>,
    #[serde(default)]
    pub flavor: Vec<FlavorDef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_share: Option<super::fair::FairShareDef>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub budget: Vec<super::budget::BudgetDef>,
}

/// Who a tenancy set from canopy.toml is audited as.
pub const SET_BY_FILE: &str = "canopy.toml";

impl TenancyDoc {
    /// Validates the tables.
    pub fn tenancy(&self) -> Result<Tenancy, TenancyError> {
        Tenancy::from_defs(&self.tenant, &self.flavor, self.default_tenant.as_deref())?
            .with_fair_share(self.fair_share.as_ref())?
            .with_budgets(&self.budget)
    }

    /// Parses a document sent as JSON (`json`) or TOML, and validates it.
    pub fn parse(text: &str, json: bool) -> Result<(TenancyDoc, Tenancy), TenancyError> {
        let doc: TenancyDoc = if json {
            serde_json::from_str(text)
                .map_err(|e| TenancyError(format!("the tenancy is not valid JSON: {e}")))?
        } else {
            toml::from_str(text).map_err(|e| TenancyError(format!("the tenancy is not valid TOML: {e}")))?
        };
        let t = doc.tenancy()?;
        Ok((doc, t))
    }

    /// The document as stored (JSON).
    pub fn to_json(&self) -> String {
        // A document of strings, numbers and lists always serializes.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Which tenancy is in force at start.
#[derive(Debug, Clone, PartialEq)]
pub enum AtStart {
    /// The journal's: set by an admin (or the file) and the file's tables
    /// are unchanged since they were last applied.
    Stored(TenancyDoc),
    /// canopy.toml's: it is new or changed since last applied; the change
    /// is journalled and audited as made by the configuration file.
    File(TenancyDoc),
    /// Neither the file nor the journal has any tenants.
    None,
}

/// The rule: the journal's version is used unless canopy.toml's tables
/// differ from the ones it was last seeded from; then the file wins.
/// `stored`: the journal's `(document, seeded_from)`, both JSON.
pub fn at_start(file: &TenancyDoc, stored: Option<(&str, &str)>) -> AtStart {
    match stored {
        None if *file == TenancyDoc::default() => AtStart::None,
        None => AtStart::File(file.clone()),
        Some((doc, seeded)) => {
            let seeded: Option<TenancyDoc> = serde_json::from_str(seeded).ok();
            let doc: Option<TenancyDoc> = serde_json::from_str(doc).ok();
            match (seeded, doc) {
                (Some(s), Some(d)) if s == *file => AtStart::Stored(d),
                _ => AtStart::File(file.clone()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(names: &[&str]) -> TenancyDoc {
        let text: String = names.iter().map(|n| format!("[[tenant]]\nname = \"{n}\"\n")).collect();
        TenancyDoc::parse(&text, false).unwrap().0
    }

    #[test]
    fn the_journal_wins_until_the_file_changes() {
        let file = doc(&["a"]);
        let admin = doc(&["a", "b"]);
        assert_eq!(at_start(&TenancyDoc::default(), None), AtStart::None);
        assert_eq!(at_start(&file, None), AtStart::File(file.clone()));
        let stored = (admin.to_json(), file.to_json());
        assert_eq!(at_start(&file, Some((&stored.0, &stored.1))), AtStart::Stored(admin.clone()));
        let edited = doc(&["c"]);
        assert_eq!(at_start(&edited, Some((&stored.0, &stored.1))), AtStart::File(edited.clone()));
        // Tenants removed from the file: the file wins, and it has none.
        assert_eq!(
            at_start(&TenancyDoc::default(), Some((&stored.0, &stored.1))),
            AtStart::File(TenancyDoc::default())
        );
    }

    #[test]
    fn json_and_toml_documents_validate_alike() {
        let e = TenancyDoc::parse(r#"{"tenant":[{"name":"a b"}]}"#, true).unwrap_err();
        assert!(e.0.contains("tenant name \"a b\" is not valid"), "{e}");
        let e = TenancyDoc::parse("[[tenant]]\nname = \"a b\"", false).unwrap_err();
        assert!(e.0.contains("tenant name \"a b\" is not valid"), "{e}");
        assert!(TenancyDoc::parse("{", true).unwrap_err().0.contains("not valid JSON"));
    }
}
