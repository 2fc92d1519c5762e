//! Configuration: the TOML IA registry, its resolution order, and classic dat.conf files.
//!
//! The registry is datrs' analogue of `/etc/dat.conf`: it names interface adapters (IAs) and
//! the transport provider that implements each one.
//!
//! ```toml
//! version = 1
//! default = "tcp-lo"
//!
//! [[ia]]
//! name = "tcp-lo"
//! provider = "tcp"
//! params = { address = "127.0.0.1" }
//!
//! [[ia]]
//! name = "shm0"
//! provider = "shm"
//! ```
//!
//! # The TOML registry ([`parse_toml`])
//!
//! * `version` (integer, **required**): the format version; only `1` is supported.
//! * `default` (string, optional): the IA used when neither the application nor `$DAT_IA`
//!   names one. It must name an `[[ia]]` entry of the same file.
//! * `[[ia]]` (array of tables, optional): one entry per IA with
//!   * `name` (string, required): non-empty, at most 255 bytes, no whitespace or control
//!     characters (the name is what `dat_ia_open` receives), unique in the file;
//!   * `provider` (string, required): one of the providers the caller knows
//!     ([`KNOWN_PROVIDERS`] for the facade);
//!   * `params` (table, optional): handed verbatim to the provider, which validates it. The
//!     core never interprets it.
//!
//! Any other key is an error, and every error names the file, the line and the key
//! ([`ConfigError`]).
//!
//! # Classic dat.conf ([`parse_dat_conf`])
//!
//! A `$DAT_CONF` file may also be a classic 8-field dat.conf (reference section 4.6), so one
//! file can serve both the stock libdat2 and datrs. Lines are tokenized like libdat2 does
//! (whitespace-separated fields, `#` comments, double quotes group whitespace, backslash escapes
//! inside quotes). A line becomes an IA when **all** of these hold:
//!
//! * it has exactly 8 fields;
//! * field 2 (API version) is `u2.0` (kDAT lines and other versions are skipped; libdat2 would
//!   not match them against a DAT 2.0 consumer either);
//! * field 3 is `threadsafe` or `nonthreadsafe` (either is accepted, the value is not kept);
//! * field 4 is `default` (libdat2 ignores `nondefault` entries, and so do we);
//! * field 5 (library) names one of our providers: either the bare provider name (`tcp`, `shm`,
//!   `verbs`) or a file whose base name is `libdat-<provider>.so`, optionally followed by a
//!   numeric version suffix (`libdat-tcp.so.1`) and preceded by a directory
//!   (`/usr/lib/libdat-tcp.so`);
//! * field 7 (ia_params) is empty or a list of `key=value` words. Each becomes a `params`
//!   entry: a decimal integer becomes a TOML integer, `true`/`false` a boolean, anything else a
//!   string. A quoted field may carry several words: `"address=10.0.0.1 port=4791"`; values
//!   cannot contain whitespace (words are split at whitespace, inner quotes do not group).
//!
//! Field 1 is the IA name (same rules as the TOML `name`); fields 6 and 8 are ignored. A later
//! line reusing a name is skipped (libdat2 also keeps the first loadable entry). Every line that
//! is not mapped (OFA libraries such as `libdaploucm.so.2`, our own C ABI `libdat_capi.so`,
//! malformed lines, `k` lines, `nondefault` lines, unknown `libdat-<x>.so` providers) is
//! recorded as a [`SkippedLine`] that says why; a dat.conf never fails to parse. Such a registry
//! has no `default`.
//!
//! # Resolution ([`resolve()`])
//!
//! 1. `$DAT_CONF`, if set and non-empty: that file must be readable (no fallback, like
//!    libdat2's `$DAT_OVERRIDE`). It is read as TOML when its name ends in `.toml` or its first
//!    significant line looks like TOML (starts with `[`, or `key =`); otherwise as a classic
//!    dat.conf.
//! 2. `$XDG_CONFIG_HOME/dat/dat.toml` when `$XDG_CONFIG_HOME` is set to an absolute path,
//!    otherwise `$HOME/.config/dat/dat.toml` (when `$HOME` is set and non-empty).
//! 3. `/etc/dat/dat.toml`.
//! 4. The embedded registry (the repository's `config/dat.toml`, compiled in by the caller).
//!
//! Files of steps 2 and 3 are used when they exist; one that exists but cannot be read or does
//! not parse is an error (no silent fallback past a broken configuration). `$DAT_OVERRIDE` is
//! deliberately not consulted: it configures the stock libdat2, which may itself load datrs.
//!
//! # Choosing an IA ([`Registry::choose`])
//!
//! The name the application passes, else `$DAT_IA` (when non-empty), else the file's `default`,
//! else the only IA if the registry holds exactly one. Anything else is an error.

mod datconf;
mod error;
mod resolve;
mod toml_file;

use std::fmt;
use std::path::{Path, PathBuf};

pub use datconf::parse_dat_conf;
pub use error::{ConfigError, ConfigErrorKind};
pub use resolve::{ETC_PATH, looks_like_toml, resolve, search_path};
pub use toml_file::parse_toml;

/// The provider names the `dat` facade knows how to build (whether or not they are compiled in).
///
/// Passed to the parsers so that a typo in `provider = "..."` is reported with the file and line,
/// at load time, rather than when the IA is opened.
pub const KNOWN_PROVIDERS: &[&str] = &["tcp", "shm", "verbs"];

/// The registry format version this crate understands.
pub const SUPPORTED_VERSION: u32 = 1;

/// Longest IA name accepted, in bytes (DAT names are shorter than 256 characters).
pub const MAX_IA_NAME_LEN: usize = 255;

/// What the configuration code needs from the process: environment variables and files.
///
/// Injected so that resolution stays pure and testable; [`ProcessEnv`] is the real one.
pub trait Environment {
    /// The value of environment variable `key`, or `None` if it is unset (or not valid UTF-8).
    fn var(&self, key: &str) -> Option<String>;

    /// The contents of the file at `path`: `Ok(None)` if it does not exist.
    ///
    /// # Errors
    ///
    /// Any other failure to read the file (permissions, not UTF-8, a directory, ...).
    fn read_file(&self, path: &Path) -> std::io::Result<Option<String>>;
}

/// The real [`Environment`]: `std::env` and `std::fs`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessEnv;

impl Environment for ProcessEnv {
    fn var(&self, key: &str) -> Option<String> {
        match std::env::var(key) {
            Ok(v) => Some(v),
            Err(std::env::VarError::NotPresent) => None,
            Err(std::env::VarError::NotUnicode(_)) => {
                tracing::warn!(key, "environment variable is not valid UTF-8; ignored");
                None
            }
        }
    }

    fn read_file(&self, path: &Path) -> std::io::Result<Option<String>> {
        match std::fs::read_to_string(path) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// Where a registry (and each of its entries) came from, for error messages and diagnostics.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Source {
    /// The registry compiled into the program (`config/dat.toml`).
    Embedded,
    /// A file on disk.
    File(PathBuf),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Embedded => f.write_str("<embedded config/dat.toml>"),
            Source::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// One interface adapter of the registry: its name, its provider and the provider's parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct IaEntry {
    /// The IA name applications pass to open it.
    pub name: String,
    /// The provider that implements it (one of the known providers).
    pub provider: String,
    /// Provider-specific parameters, unvalidated here (each provider parses its own).
    pub params: toml::Table,
    /// The file the entry came from.
    pub source: Source,
    /// The 1-based line of the entry (its `[[ia]]` header or dat.conf line), when known.
    pub line: Option<usize>,
}

/// A dat.conf line that did not become an IA, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedLine {
    /// The 1-based line number.
    pub line: usize,
    /// Why the line was not mapped, in words.
    pub reason: String,
}

/// A parsed IA registry.
#[derive(Debug, Clone, PartialEq)]
pub struct Registry {
    /// The format version (always [`SUPPORTED_VERSION`] once parsed).
    pub version: u32,
    /// The IA to use when none is named.
    pub default: Option<String>,
    /// The IAs, in file order, with unique names.
    pub ias: Vec<IaEntry>,
    /// Where the registry came from.
    pub source: Source,
    /// dat.conf lines that were not mapped (always empty for a TOML registry).
    pub skipped: Vec<SkippedLine>,
}

impl Registry {
    /// The IA named `name`, if the registry has one.
    pub fn get(&self, name: &str) -> Option<&IaEntry> {
        self.ias.iter().find(|ia| ia.name == name)
    }

    /// The IA names, in file order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.ias.iter().map(|ia| ia.name.as_str())
    }

    /// Choose the IA to open: `explicit`, else `$DAT_IA` (if set and non-empty), else the
    /// registry's `default`, else the only IA when there is exactly one.
    ///
    /// An explicit name is always looked up as given (even `""`); an empty `$DAT_IA` counts as
    /// unset.
    ///
    /// # Errors
    ///
    /// Both map to `DAT_PROVIDER_NOT_FOUND | DAT_NAME_NOT_REGISTERED` via
    /// [`ConfigError::dat_error`]:
    /// * [`ConfigErrorKind::UnknownIa`]: the chosen name is not in the registry (the error says
    ///   where the name came from and lists the IAs that exist);
    /// * [`ConfigErrorKind::NoIaChosen`]: nothing names an IA and the registry does not hold
    ///   exactly one.
    pub fn choose(
        &self,
        explicit: Option<&str>,
        env: &dyn Environment,
    ) -> Result<&IaEntry, ConfigError> {
        let from_env = env.var("DAT_IA").filter(|v| !v.is_empty());
        let (name, origin) = if let Some(name) = explicit {
            (name.to_owned(), "the application")
        } else if let Some(name) = from_env {
            (name, "$DAT_IA")
        } else if let Some(name) = &self.default {
            (name.clone(), "`default`")
        } else {
            return match self.ias.as_slice() {
                [only] => Ok(only),
                _ => Err(self.no_ia_chosen()),
            };
        };
        self.get(&name)
            .ok_or_else(|| self.unknown_ia(&name, origin))
    }

    fn available(&self) -> String {
        if self.ias.is_empty() {
            let mut s = String::from("the registry has no IAs");
            if !self.skipped.is_empty() {
                s.push_str(&format!(
                    " ({} dat.conf line(s) skipped; the first, line {}: {})",
                    self.skipped.len(),
                    self.skipped.first().map_or(0, |l| l.line),
                    self.skipped.first().map_or("", |l| l.reason.as_str()),
                ));
            }
            s
        } else {
            let names: Vec<String> = self.names().map(|n| format!("`{n}`")).collect();
            format!("known IAs: {}", names.join(", "))
        }
    }

    fn unknown_ia(&self, name: &str, origin: &str) -> ConfigError {
        ConfigError::new(
            ConfigErrorKind::UnknownIa,
            self.source.clone(),
            None,
            None,
            format!(
                "unknown IA `{name}` (named by {origin}); {}",
                self.available()
            ),
        )
    }

    fn no_ia_chosen(&self) -> ConfigError {
        ConfigError::new(
            ConfigErrorKind::NoIaChosen,
            self.source.clone(),
            None,
            None,
            format!(
                "no IA chosen: pass a name, set $DAT_IA or set `default`; {}",
                self.available()
            ),
        )
    }
}

/// Check an IA name (shared by both formats): `None` if valid, else why not.
fn name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        Some("IA name is empty".to_owned())
    } else if name.len() > MAX_IA_NAME_LEN {
        Some(format!(
            "IA name is {} bytes long; at most {MAX_IA_NAME_LEN} are allowed",
            name.len()
        ))
    } else if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Some(format!(
            "IA name `{}` contains whitespace or control characters",
            name.escape_debug()
        ))
    } else {
        None
    }
}

/// 1-based line number of byte `offset` in `text` (offsets past the end count as the last line).
fn line_of(text: &str, offset: usize) -> usize {
    text.bytes().take(offset).filter(|&b| b == b'\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    // Read-only checks of the real environment (tests never modify it).
    #[test]
    fn process_env_reads_files_and_reports_missing_ones() {
        let env = ProcessEnv;
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
        let text = env
            .read_file(&manifest)
            .map(|t| t.map(|t| t.contains("dat-core")));
        assert_eq!(text.ok(), Some(Some(true)));
        let missing = Path::new(env!("CARGO_MANIFEST_DIR")).join("no-such-file.toml");
        assert!(matches!(env.read_file(&missing), Ok(None)));
        // A directory exists but is not readable as a file.
        assert!(
            env.read_file(Path::new(env!("CARGO_MANIFEST_DIR")))
                .is_err()
        );
        assert_eq!(env.var("DATRS_TEST_VARIABLE_THAT_IS_NEVER_SET"), None);
    }

    #[test]
    fn source_display() {
        assert_eq!(Source::Embedded.to_string(), "<embedded config/dat.toml>");
        assert_eq!(
            Source::File(PathBuf::from("/etc/dat/dat.toml")).to_string(),
            "/etc/dat/dat.toml"
        );
    }

    #[test]
    fn name_rules() {
        assert_eq!(name_problem("tcp-lo"), None);
        assert_eq!(name_problem(&"é".repeat(127)), None); // 254 bytes
        assert!(name_problem(&"é".repeat(128)).is_some()); // 256 bytes
        assert!(name_problem("a\tb").is_some());
        assert!(name_problem("a\u{7f}").is_some());
    }
}

/// A fake [`Environment`] for tests: variables and files from maps, optional read failures.
#[cfg(test)]
pub(crate) mod fake {
    use super::Environment;
    use std::collections::HashMap;
    use std::path::{Path, PathBuf};

    /// Variables and files held in memory; `unreadable` paths fail with `PermissionDenied`.
    #[derive(Default)]
    pub(crate) struct FakeEnv {
        pub(crate) vars: HashMap<String, String>,
        pub(crate) files: HashMap<PathBuf, String>,
        pub(crate) unreadable: Vec<PathBuf>,
    }

    impl FakeEnv {
        pub(crate) fn var(mut self, k: &str, v: &str) -> Self {
            self.vars.insert(k.to_owned(), v.to_owned());
            self
        }
        pub(crate) fn file(mut self, p: &str, text: &str) -> Self {
            self.files.insert(PathBuf::from(p), text.to_owned());
            self
        }
        pub(crate) fn unreadable(mut self, p: &str) -> Self {
            self.unreadable.push(PathBuf::from(p));
            self
        }
    }

    impl Environment for FakeEnv {
        fn var(&self, key: &str) -> Option<String> {
            self.vars.get(key).cloned()
        }
        fn read_file(&self, path: &Path) -> std::io::Result<Option<String>> {
            if self.unreadable.iter().any(|p| p == path) {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    "permission denied",
                ));
            }
            Ok(self.files.get(path).cloned())
        }
    }
}
