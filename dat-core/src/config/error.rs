//! Configuration errors: what went wrong, in which file, on which line, with which key.

use std::fmt;

use super::{IaEntry, Source};
use crate::error::{DatError, ErrorType, Subtype};

/// The kind of a [`ConfigError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConfigErrorKind {
    /// The file is not valid TOML.
    Syntax,
    /// A key the format does not define (top level or inside an `[[ia]]` entry).
    UnknownKey,
    /// A required key (`version`, `name`, `provider`) is absent.
    MissingKey,
    /// A key has a value of the wrong TOML type.
    WrongType,
    /// A value has the right type but is not acceptable (e.g. an empty IA name).
    InvalidValue,
    /// `version` is not one this crate supports.
    UnsupportedVersion,
    /// Two `[[ia]]` entries share a name.
    DuplicateIa,
    /// `provider` names a provider the caller does not know.
    UnknownProvider,
    /// `default` names an IA that the file does not define.
    UnknownDefault,
    /// A configuration file exists (or `$DAT_CONF` names one) but cannot be read.
    Unreadable,
    /// `$DAT_CONF` names a file that does not exist.
    NotFound,
    /// The IA name chosen (explicitly, by `$DAT_IA` or by `default`) is not in the registry.
    UnknownIa,
    /// Nothing names an IA and the registry does not hold exactly one.
    NoIaChosen,
    /// The IA's provider is known but not compiled into this program (reported by the facade
    /// through [`ConfigError::provider_not_compiled`]).
    ProviderNotCompiled,
}

/// A configuration problem, with enough context to fix it: the file, the line and the key.
///
/// `Display` renders `file:line: message`, e.g.
/// `/etc/dat/dat.toml:7: unknown key `adress` in [[ia]] `tcp-lo``.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// What went wrong.
    pub kind: ConfigErrorKind,
    /// The registry file concerned.
    pub source: Source,
    /// The 1-based line, when the problem is on one.
    pub line: Option<usize>,
    /// The key concerned (`version`, `default`, `ia`, `name`, `provider`, `params`, or the
    /// unknown key itself), when there is one.
    pub key: Option<String>,
    /// A human-readable description (without the file and line prefix).
    pub message: String,
}

impl ConfigError {
    /// Build an error from its parts.
    pub fn new(
        kind: ConfigErrorKind,
        source: Source,
        line: Option<usize>,
        key: Option<&str>,
        message: impl Into<String>,
    ) -> ConfigError {
        ConfigError {
            kind,
            source,
            line,
            key: key.map(str::to_owned),
            message: message.into(),
        }
    }

    /// The error the facade reports when `entry`'s provider is not compiled in: it names the
    /// entry's file and line, the `provider` key, and the providers that are (`compiled`).
    pub fn provider_not_compiled(entry: &IaEntry, compiled: &[&str]) -> ConfigError {
        let list = if compiled.is_empty() {
            "none".to_owned()
        } else {
            compiled.join(", ")
        };
        ConfigError::new(
            ConfigErrorKind::ProviderNotCompiled,
            entry.source.clone(),
            entry.line,
            Some("provider"),
            format!(
                "IA `{}` needs provider `{}`, which is not compiled into this program \
                 (enable the `dat` crate feature `{}`; compiled in: {list})",
                entry.name, entry.provider, entry.provider
            ),
        )
    }

    /// The `DAT_RETURN` an API call reports for this error.
    ///
    /// * [`UnknownIa`](ConfigErrorKind::UnknownIa), [`NoIaChosen`](ConfigErrorKind::NoIaChosen)
    ///   and [`ProviderNotCompiled`](ConfigErrorKind::ProviderNotCompiled):
    ///   `DAT_PROVIDER_NOT_FOUND | DAT_NAME_NOT_REGISTERED`, exactly what libdat2's
    ///   `dat_ia_openv` returns for a name it cannot open (also when the provider library
    ///   cannot be loaded).
    /// * Every other kind (the registry itself could not be read or is invalid):
    ///   `DAT_PROVIDER_NOT_FOUND | DAT_NO_SUBTYPE`. No name can be looked up in a broken
    ///   registry; the subtype tells it apart from a missing name.
    pub fn dat_error(&self) -> DatError {
        match self.kind {
            ConfigErrorKind::UnknownIa
            | ConfigErrorKind::NoIaChosen
            | ConfigErrorKind::ProviderNotCompiled => {
                DatError::new(ErrorType::ProviderNotFound, Subtype::NameNotRegistered)
            }
            ConfigErrorKind::Syntax
            | ConfigErrorKind::UnknownKey
            | ConfigErrorKind::MissingKey
            | ConfigErrorKind::WrongType
            | ConfigErrorKind::InvalidValue
            | ConfigErrorKind::UnsupportedVersion
            | ConfigErrorKind::DuplicateIa
            | ConfigErrorKind::UnknownProvider
            | ConfigErrorKind::UnknownDefault
            | ConfigErrorKind::Unreadable
            | ConfigErrorKind::NotFound => {
                DatError::new(ErrorType::ProviderNotFound, Subtype::NoSubtype)
            }
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{}: {}", self.source, line, self.message),
            None => write!(f, "{}: {}", self.source, self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

impl From<ConfigError> for DatError {
    fn from(e: ConfigError) -> DatError {
        e.dat_error()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn entry() -> IaEntry {
        IaEntry {
            name: "v0".into(),
            provider: "verbs".into(),
            params: toml::Table::new(),
            source: Source::File(PathBuf::from("/etc/dat/dat.toml")),
            line: Some(9),
        }
    }

    #[test]
    fn display_names_file_and_line() {
        let e = ConfigError::new(
            ConfigErrorKind::UnknownKey,
            Source::File(PathBuf::from("/etc/dat/dat.toml")),
            Some(7),
            Some("adress"),
            "unknown key `adress` in [[ia]] `tcp-lo`",
        );
        assert_eq!(
            e.to_string(),
            "/etc/dat/dat.toml:7: unknown key `adress` in [[ia]] `tcp-lo`"
        );
        let e = ConfigError::new(
            ConfigErrorKind::UnknownIa,
            Source::Embedded,
            None,
            None,
            "x",
        );
        assert_eq!(e.to_string(), "<embedded config/dat.toml>: x");
    }

    #[test]
    fn provider_not_compiled_names_entry() {
        let e = ConfigError::provider_not_compiled(&entry(), &["tcp", "shm"]);
        assert_eq!(e.kind, ConfigErrorKind::ProviderNotCompiled);
        assert_eq!(e.line, Some(9));
        assert_eq!(e.key.as_deref(), Some("provider"));
        assert_eq!(
            e.to_string(),
            "/etc/dat/dat.toml:9: IA `v0` needs provider `verbs`, which is not compiled into \
             this program (enable the `dat` crate feature `verbs`; compiled in: tcp, shm)"
        );
        let e = ConfigError::provider_not_compiled(&entry(), &[]);
        assert!(e.message.ends_with("compiled in: none)"));
    }

    #[test]
    fn dat_error_mapping() {
        let not_registered = DatError::new(ErrorType::ProviderNotFound, Subtype::NameNotRegistered);
        let broken = DatError::new(ErrorType::ProviderNotFound, Subtype::NoSubtype);
        let table = [
            (ConfigErrorKind::Syntax, broken),
            (ConfigErrorKind::UnknownKey, broken),
            (ConfigErrorKind::MissingKey, broken),
            (ConfigErrorKind::WrongType, broken),
            (ConfigErrorKind::InvalidValue, broken),
            (ConfigErrorKind::UnsupportedVersion, broken),
            (ConfigErrorKind::DuplicateIa, broken),
            (ConfigErrorKind::UnknownProvider, broken),
            (ConfigErrorKind::UnknownDefault, broken),
            (ConfigErrorKind::Unreadable, broken),
            (ConfigErrorKind::NotFound, broken),
            (ConfigErrorKind::UnknownIa, not_registered),
            (ConfigErrorKind::NoIaChosen, not_registered),
            (ConfigErrorKind::ProviderNotCompiled, not_registered),
        ];
        for (kind, want) in table {
            let e = ConfigError::new(kind, Source::Embedded, None, None, "m");
            assert_eq!(e.dat_error(), want, "{kind:?}");
            assert_eq!(DatError::from(e), want);
        }
        assert_eq!(not_registered.to_raw(), 0x800A_0064);
        assert_eq!(broken.to_raw(), 0x800A_0000);
    }
}
