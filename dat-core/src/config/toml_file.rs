//! The TOML registry format (`dat.toml`), validated by hand so every error names its line and key.
//!
//! The document is deserialized into maps whose keys and values carry their byte spans
//! ([`toml::Spanned`]); the spans are turned into line numbers for error messages.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::{Spanned, Value};

use super::{
    ConfigError, ConfigErrorKind, IaEntry, Registry, SUPPORTED_VERSION, Source, line_of,
    name_problem,
};

/// A TOML table whose keys and values remember where they are in the text.
type SpannedMap = BTreeMap<Spanned<String>, Spanned<Value>>;

/// Second pass: only the `[[ia]]` entries, each with its own span and spanned keys.
#[derive(Deserialize)]
struct IaPass {
    #[serde(default)]
    ia: Vec<Spanned<SpannedMap>>,
}

/// Shared state while checking one document.
struct Ctx<'a> {
    text: &'a str,
    source: &'a Source,
}

impl Ctx<'_> {
    fn line(&self, offset: usize) -> usize {
        line_of(self.text, offset)
    }

    fn err(
        &self,
        kind: ConfigErrorKind,
        offset: Option<usize>,
        key: Option<&str>,
        message: String,
    ) -> ConfigError {
        ConfigError::new(
            kind,
            self.source.clone(),
            offset.map(|o| self.line(o)),
            key,
            message,
        )
    }

    fn syntax(&self, e: &toml::de::Error) -> ConfigError {
        // toml's messages may span lines ("invalid table header\nexpected ..."): keep one line.
        let detail: Vec<&str> = e
            .message()
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let message = format!("TOML syntax error: {}", detail.join("; "));
        self.err(
            ConfigErrorKind::Syntax,
            e.span().map(|s| s.start),
            None,
            message,
        )
    }

    fn wrong_type(
        &self,
        key: &Spanned<String>,
        what: &str,
        want: &str,
        got: &Value,
    ) -> ConfigError {
        self.err(
            ConfigErrorKind::WrongType,
            Some(key.span().start),
            Some(key.get_ref()),
            format!(
                "`{}`{what} must be {want}, not {} {}",
                key.get_ref(),
                article(got.type_str()),
                got.type_str()
            ),
        )
    }
}

fn article(type_name: &str) -> &'static str {
    if type_name.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

/// Entries of a spanned map in document order (the map itself is ordered by key).
fn in_file_order(map: &SpannedMap) -> Vec<(&Spanned<String>, &Spanned<Value>)> {
    let mut v: Vec<_> = map.iter().collect();
    v.sort_by_key(|(k, _)| k.span().start);
    v
}

/// Parse and validate a TOML registry.
///
/// `source` is recorded in the registry, its entries and any error; `known_providers` lists
/// the accepted `provider` values. The format is described in the [module docs](super).
///
/// # Errors
///
/// A [`ConfigError`] naming the line and key, of kind [`ConfigErrorKind::Syntax`],
/// [`UnknownKey`](ConfigErrorKind::UnknownKey), [`MissingKey`](ConfigErrorKind::MissingKey),
/// [`WrongType`](ConfigErrorKind::WrongType), [`InvalidValue`](ConfigErrorKind::InvalidValue),
/// [`UnsupportedVersion`](ConfigErrorKind::UnsupportedVersion),
/// [`DuplicateIa`](ConfigErrorKind::DuplicateIa),
/// [`UnknownProvider`](ConfigErrorKind::UnknownProvider) or
/// [`UnknownDefault`](ConfigErrorKind::UnknownDefault). All of them map to
/// `DAT_PROVIDER_NOT_FOUND | DAT_NO_SUBTYPE` ([`ConfigError::dat_error`]).
pub fn parse_toml(
    text: &str,
    source: Source,
    known_providers: &[&str],
) -> Result<Registry, ConfigError> {
    let cx = Ctx {
        text,
        source: &source,
    };
    let root: SpannedMap = toml::from_str(text).map_err(|e| cx.syntax(&e))?;

    // The version first: a newer format may well have keys this one does not know.
    let version = check_version(&cx, &root)?;

    let mut default_value: Option<(&Spanned<String>, String)> = None;
    for (key, value) in in_file_order(&root) {
        match key.get_ref().as_str() {
            "version" => {}
            "default" => match value.get_ref() {
                Value::String(s) => default_value = Some((key, s.clone())),
                other => return Err(cx.wrong_type(key, "", "a string (an IA name)", other)),
            },
            "ia" => check_ia_shape(&cx, key, value.get_ref())?,
            other => {
                return Err(cx.err(
                    ConfigErrorKind::UnknownKey,
                    Some(key.span().start),
                    Some(other),
                    format!(
                        "unknown key `{other}` at top level; expected `version`, `default` \
                         or `[[ia]]`"
                    ),
                ));
            }
        }
    }
    let pass: IaPass = toml::from_str(text).map_err(|e| cx.syntax(&e))?;
    let mut ias: Vec<IaEntry> = Vec::with_capacity(pass.ia.len());
    for (index, entry) in pass.ia.iter().enumerate() {
        let ia = check_entry(&cx, index, entry, known_providers, &ias)?;
        ias.push(ia);
    }

    if let Some((key, name)) = &default_value
        && !ias.iter().any(|ia| &ia.name == name)
    {
        let defined = if ias.is_empty() {
            "the file defines no IAs".to_owned()
        } else {
            let names: Vec<String> = ias.iter().map(|ia| format!("`{}`", ia.name)).collect();
            format!("defined: {}", names.join(", "))
        };
        return Err(cx.err(
            ConfigErrorKind::UnknownDefault,
            Some(key.span().start),
            Some("default"),
            format!("`default` names IA `{name}`, which is not defined in this file; {defined}"),
        ));
    }

    Ok(Registry {
        version,
        default: default_value.map(|(_, name)| name),
        ias,
        source,
        skipped: Vec::new(),
    })
}

fn check_version(cx: &Ctx<'_>, root: &SpannedMap) -> Result<u32, ConfigError> {
    let Some((key, value)) = root.get_key_value("version") else {
        return Err(cx.err(
            ConfigErrorKind::MissingKey,
            None,
            Some("version"),
            format!("missing key `version` (add `version = {SUPPORTED_VERSION}` at the top)"),
        ));
    };
    match value.get_ref() {
        Value::Integer(v) if u32::try_from(*v).ok() == Some(SUPPORTED_VERSION) => {
            Ok(SUPPORTED_VERSION)
        }
        Value::Integer(v) => Err(cx.err(
            ConfigErrorKind::UnsupportedVersion,
            Some(key.span().start),
            Some("version"),
            format!("unsupported `version` {v}; this program supports version {SUPPORTED_VERSION}"),
        )),
        other => Err(cx.wrong_type(key, "", "an integer", other)),
    }
}

/// `ia` must be an array of tables (`[[ia]]` or `ia = [{ ... }]`).
fn check_ia_shape(cx: &Ctx<'_>, key: &Spanned<String>, value: &Value) -> Result<(), ConfigError> {
    match value {
        Value::Array(items) => match items.iter().find(|v| !v.is_table()) {
            None => Ok(()),
            Some(bad) => Err(cx.err(
                ConfigErrorKind::WrongType,
                Some(key.span().start),
                Some("ia"),
                format!(
                    "`ia` must be an array of tables (`[[ia]]`), but it holds {} {}",
                    article(bad.type_str()),
                    bad.type_str()
                ),
            )),
        },
        other => Err(cx.wrong_type(key, "", "an array of tables (`[[ia]]`)", other)),
    }
}

fn check_entry(
    cx: &Ctx<'_>,
    index: usize,
    entry: &Spanned<SpannedMap>,
    known_providers: &[&str],
    earlier: &[IaEntry],
) -> Result<IaEntry, ConfigError> {
    let map = entry.get_ref();
    let entry_offset = entry.span().start;

    // The entry's label for messages: its name when it has a usable one, else its position.
    let name_value = map.get("name").and_then(|v| v.get_ref().as_str());
    let label = match name_value {
        Some(n) if name_problem(n).is_none() => format!("[[ia]] `{n}`"),
        _ => format!("[[ia]] #{}", index + 1),
    };

    let mut name: Option<(&Spanned<String>, &str)> = None;
    let mut provider: Option<(&Spanned<String>, &str)> = None;
    let mut params = toml::Table::new();
    for (key, value) in in_file_order(map) {
        let what = format!(" in {label}");
        match (key.get_ref().as_str(), value.get_ref()) {
            ("name", Value::String(s)) => name = Some((key, s)),
            ("provider", Value::String(s)) => provider = Some((key, s)),
            ("params", Value::Table(t)) => params = t.clone(),
            ("name" | "provider", other) => {
                return Err(cx.wrong_type(key, &what, "a string", other));
            }
            ("params", other) => {
                return Err(cx.wrong_type(key, &what, "a table", other));
            }
            (other, _) => {
                return Err(cx.err(
                    ConfigErrorKind::UnknownKey,
                    Some(key.span().start),
                    Some(other),
                    format!(
                        "unknown key `{other}`{what}; expected `name`, `provider` or `params` \
                         (provider settings go in `params`)"
                    ),
                ));
            }
        }
    }

    let missing = |key: &str| {
        cx.err(
            ConfigErrorKind::MissingKey,
            Some(entry_offset),
            Some(key),
            format!("missing key `{key}` in {label}"),
        )
    };
    let (name_key, name) = name.ok_or_else(|| missing("name"))?;
    let (provider_key, provider) = provider.ok_or_else(|| missing("provider"))?;

    if let Some(problem) = name_problem(name) {
        return Err(cx.err(
            ConfigErrorKind::InvalidValue,
            Some(name_key.span().start),
            Some("name"),
            format!("{problem} in {label}"),
        ));
    }
    if let Some(first) = earlier.iter().find(|ia| ia.name == name) {
        let first_line = first
            .line
            .map_or_else(String::new, |l| format!(" (first defined on line {l})"));
        return Err(cx.err(
            ConfigErrorKind::DuplicateIa,
            Some(name_key.span().start),
            Some("name"),
            format!("duplicate IA name `{name}`{first_line}"),
        ));
    }
    if !known_providers.contains(&provider) {
        return Err(cx.err(
            ConfigErrorKind::UnknownProvider,
            Some(provider_key.span().start),
            Some("provider"),
            format!(
                "unknown provider `{provider}` in {label}; known providers: {}",
                known_providers.join(", ")
            ),
        ));
    }

    Ok(IaEntry {
        name: name.to_owned(),
        provider: provider.to_owned(),
        params,
        source: cx.source.clone(),
        line: Some(cx.line(entry_offset)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::KNOWN_PROVIDERS;
    use crate::error::{DatError, ErrorType, Subtype};
    use std::path::PathBuf;

    fn src() -> Source {
        Source::File(PathBuf::from("/etc/dat/dat.toml"))
    }

    fn parse(text: &str) -> Result<Registry, ConfigError> {
        parse_toml(text, src(), KNOWN_PROVIDERS)
    }

    fn ok(text: &str) -> Registry {
        match parse(text) {
            Ok(r) => r,
            Err(e) => panic!("parse failed: {e}"),
        }
    }

    #[test]
    fn full_registry() {
        let r = ok(r#"# registry
version = 1
default = "tcp-lo"

[[ia]]
name = "tcp-lo"
provider = "tcp"
params = { address = "127.0.0.1" }

[[ia]]
name = "shm0"
provider = "shm"

[[ia]]
name = "verbs-mlx5_0"
provider = "verbs"
[ia.params]
device = "mlx5_0"
port = 1
unknown_to_core = [1, 2]
"#);
        assert_eq!(r.version, 1);
        assert_eq!(r.default.as_deref(), Some("tcp-lo"));
        assert_eq!(r.source, src());
        assert!(r.skipped.is_empty());
        let got: Vec<(&str, &str, Option<usize>)> = r
            .ias
            .iter()
            .map(|ia| (ia.name.as_str(), ia.provider.as_str(), ia.line))
            .collect();
        assert_eq!(
            got,
            [
                ("tcp-lo", "tcp", Some(5)),
                ("shm0", "shm", Some(10)),
                ("verbs-mlx5_0", "verbs", Some(14)),
            ]
        );
        let mut want = toml::Table::new();
        want.insert("address".into(), Value::String("127.0.0.1".into()));
        assert_eq!(r.ias[0].params, want);
        assert!(r.ias[1].params.is_empty());
        let verbs = &r.ias[2].params;
        assert_eq!(verbs.get("device"), Some(&Value::String("mlx5_0".into())));
        assert_eq!(verbs.get("port"), Some(&Value::Integer(1)));
        assert_eq!(
            verbs.len(),
            3,
            "params are kept verbatim, unknown keys included"
        );
        assert!(r.ias.iter().all(|ia| ia.source == src()));
    }

    #[test]
    fn inline_array_and_minimal_files() {
        let r = ok(
            "version = 1\nia = [\n  { name = \"a\", provider = \"tcp\" },\n  \
                    { name = \"b\", provider = \"shm\", params = { x = true } },\n]\n",
        );
        assert_eq!(r.ias.len(), 2);
        assert_eq!(r.ias[0].line, Some(3));
        assert_eq!(r.ias[1].line, Some(4));
        assert_eq!(r.ias[1].params.get("x"), Some(&Value::Boolean(true)));
        let r = ok("version = 1");
        assert!(r.ias.is_empty());
        assert_eq!(r.default, None);
        // Name length limit: 255 bytes are fine.
        let long = "n".repeat(255);
        let r = ok(&format!(
            "version = 1\n[[ia]]\nname = \"{long}\"\nprovider = \"tcp\"\n"
        ));
        assert_eq!(r.ias[0].name, long);
        // The known providers are the caller's.
        let text = "version = 1\n[[ia]]\nname = \"a\"\nprovider = \"mock\"\n";
        assert!(parse_toml(text, src(), &["mock"]).is_ok());
        assert!(parse(text).is_err());
    }

    /// (text, kind, line, key, full Display) for every error the parser reports.
    #[test]
    fn error_table() {
        use ConfigErrorKind as K;
        let ia = |body: &str| format!("version = 1\n[[ia]]\n{body}");
        /// Input, kind, line, key, full `Display`.
        type Case = (String, K, Option<usize>, Option<&'static str>, &'static str);
        let table: Vec<Case> = vec![
            (
                "version = 1\n[[ia]\n".into(),
                K::Syntax,
                Some(2),
                None,
                "/etc/dat/dat.toml:2: TOML syntax error: invalid table header; expected `.`, `]]`",
            ),
            (
                "version = 1\nname = \"a\nb\"\n".into(),
                K::Syntax,
                Some(2),
                None,
                "/etc/dat/dat.toml:2: TOML syntax error: invalid basic string",
            ),
            (
                "version = 1\nversion = 1\n".into(),
                K::Syntax,
                Some(2),
                None,
                "/etc/dat/dat.toml:2: TOML syntax error: duplicate key `version` in document root",
            ),
            (
                "\n\nversion = 1\ndefualt = \"x\"\n".into(),
                K::UnknownKey,
                Some(4),
                Some("defualt"),
                "/etc/dat/dat.toml:4: unknown key `defualt` at top level; expected `version`, `default` or `[[ia]]`",
            ),
            (
                "version = 1\n[tcp]\naddress = \"x\"\n".into(),
                K::UnknownKey,
                Some(2),
                Some("tcp"),
                "/etc/dat/dat.toml:2: unknown key `tcp` at top level; expected `version`, `default` or `[[ia]]`",
            ),
            (
                ia("name = \"tcp-lo\"\nprovider = \"tcp\"\nadress = \"127.0.0.1\"\n"),
                K::UnknownKey,
                Some(5),
                Some("adress"),
                "/etc/dat/dat.toml:5: unknown key `adress` in [[ia]] `tcp-lo`; expected `name`, `provider` or `params` (provider settings go in `params`)",
            ),
            (
                ia("nmae = \"x\"\nprovider = \"tcp\"\n"),
                K::UnknownKey,
                Some(3),
                Some("nmae"),
                "/etc/dat/dat.toml:3: unknown key `nmae` in [[ia]] #1; expected `name`, `provider` or `params` (provider settings go in `params`)",
            ),
            (
                "default = \"a\"\n".into(),
                K::MissingKey,
                None,
                Some("version"),
                "/etc/dat/dat.toml: missing key `version` (add `version = 1` at the top)",
            ),
            (
                ia("provider = \"tcp\"\n"),
                K::MissingKey,
                Some(2),
                Some("name"),
                "/etc/dat/dat.toml:2: missing key `name` in [[ia]] #1",
            ),
            (
                format!(
                    "{}[[ia]]\nname = \"b\"\n",
                    ia("name = \"a\"\nprovider = \"tcp\"\n")
                ),
                K::MissingKey,
                Some(5),
                Some("provider"),
                "/etc/dat/dat.toml:5: missing key `provider` in [[ia]] `b`",
            ),
            (
                "version = \"1\"\n".into(),
                K::WrongType,
                Some(1),
                Some("version"),
                "/etc/dat/dat.toml:1: `version` must be an integer, not a string",
            ),
            (
                "version = 1\ndefault = 3\n".into(),
                K::WrongType,
                Some(2),
                Some("default"),
                "/etc/dat/dat.toml:2: `default` must be a string (an IA name), not an integer",
            ),
            (
                "version = 1\nia = \"tcp\"\n".into(),
                K::WrongType,
                Some(2),
                Some("ia"),
                "/etc/dat/dat.toml:2: `ia` must be an array of tables (`[[ia]]`), not a string",
            ),
            (
                "version = 1\n[ia]\nname = \"a\"\n".into(),
                K::WrongType,
                Some(2),
                Some("ia"),
                "/etc/dat/dat.toml:2: `ia` must be an array of tables (`[[ia]]`), not a table",
            ),
            (
                "version = 1\nia = [1]\n".into(),
                K::WrongType,
                Some(2),
                Some("ia"),
                "/etc/dat/dat.toml:2: `ia` must be an array of tables (`[[ia]]`), but it holds an integer",
            ),
            (
                ia("name = 7\nprovider = \"tcp\"\n"),
                K::WrongType,
                Some(3),
                Some("name"),
                "/etc/dat/dat.toml:3: `name` in [[ia]] #1 must be a string, not an integer",
            ),
            (
                ia("name = \"a\"\nprovider = [\"tcp\"]\n"),
                K::WrongType,
                Some(4),
                Some("provider"),
                "/etc/dat/dat.toml:4: `provider` in [[ia]] `a` must be a string, not an array",
            ),
            (
                ia("name = \"a\"\nprovider = \"tcp\"\nparams = \"address=1.2.3.4\"\n"),
                K::WrongType,
                Some(5),
                Some("params"),
                "/etc/dat/dat.toml:5: `params` in [[ia]] `a` must be a table, not a string",
            ),
            (
                ia("name = \"\"\nprovider = \"tcp\"\n"),
                K::InvalidValue,
                Some(3),
                Some("name"),
                "/etc/dat/dat.toml:3: IA name is empty in [[ia]] #1",
            ),
            (
                ia("name = \"a b\"\nprovider = \"tcp\"\n"),
                K::InvalidValue,
                Some(3),
                Some("name"),
                "/etc/dat/dat.toml:3: IA name `a b` contains whitespace or control characters in [[ia]] #1",
            ),
            (
                ia(&format!(
                    "name = \"{}\"\nprovider = \"tcp\"\n",
                    "x".repeat(256)
                )),
                K::InvalidValue,
                Some(3),
                Some("name"),
                "/etc/dat/dat.toml:3: IA name is 256 bytes long; at most 255 are allowed in [[ia]] #1",
            ),
            (
                "version = 2\nfuture = true\n".into(),
                K::UnsupportedVersion,
                Some(1),
                Some("version"),
                "/etc/dat/dat.toml:1: unsupported `version` 2; this program supports version 1",
            ),
            (
                "version = -1\n".into(),
                K::UnsupportedVersion,
                Some(1),
                Some("version"),
                "/etc/dat/dat.toml:1: unsupported `version` -1; this program supports version 1",
            ),
            (
                format!(
                    "{}\n[[ia]]\nname = \"a\"\nprovider = \"shm\"\n",
                    ia("name = \"a\"\nprovider = \"tcp\"\n")
                ),
                K::DuplicateIa,
                Some(7),
                Some("name"),
                "/etc/dat/dat.toml:7: duplicate IA name `a` (first defined on line 2)",
            ),
            (
                ia("name = \"a\"\nprovider = \"tpc\"\n"),
                K::UnknownProvider,
                Some(4),
                Some("provider"),
                "/etc/dat/dat.toml:4: unknown provider `tpc` in [[ia]] `a`; known providers: tcp, shm, verbs",
            ),
            (
                format!(
                    "version = 1\ndefault = \"b\"\n{}",
                    "[[ia]]\nname = \"a\"\nprovider = \"tcp\"\n"
                ),
                K::UnknownDefault,
                Some(2),
                Some("default"),
                "/etc/dat/dat.toml:2: `default` names IA `b`, which is not defined in this file; defined: `a`",
            ),
            (
                "version = 1\ndefault = \"b\"\n".into(),
                K::UnknownDefault,
                Some(2),
                Some("default"),
                "/etc/dat/dat.toml:2: `default` names IA `b`, which is not defined in this file; the file defines no IAs",
            ),
        ];
        let broken = DatError::new(ErrorType::ProviderNotFound, Subtype::NoSubtype);
        for (text, kind, line, key, display) in &table {
            let e = match parse(text) {
                Ok(_) => panic!("parsed: {text}"),
                Err(e) => e,
            };
            assert_eq!(e.kind, *kind, "{text}\n{e}");
            assert_eq!(e.line, *line, "{text}\n{e}");
            assert_eq!(e.key.as_deref(), *key, "{text}\n{e}");
            assert_eq!(e.source, src());
            assert_eq!(e.to_string(), *display, "{text}");
            assert_eq!(e.dat_error(), broken);
        }
    }

    #[test]
    fn line_of_offsets() {
        assert_eq!(line_of("", 0), 1);
        assert_eq!(line_of("a\nb", 2), 2);
        assert_eq!(line_of("a\nb", 99), 2);
    }

    #[test]
    fn garbage_never_panics() {
        for text in [
            "",
            "=",
            "[[",
            "\u{0}",
            "ia = [[]]",
            "version = 1e400",
            "[[ia]]\n[[ia]]",
        ] {
            let _ = parse(text);
        }
    }
}
