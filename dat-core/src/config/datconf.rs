//! Classic 8-field dat.conf files (reference section 4.6), mapped onto the registry model.
//!
//! The mapping rules are described in the [module docs](super). Parsing never fails: every
//! line that does not map to an IA becomes a [`SkippedLine`] with the reason.

use super::{ConfigError, IaEntry, Registry, SUPPORTED_VERSION, SkippedLine, Source, name_problem};

/// Parse a classic dat.conf, keeping the lines that name one of `known_providers`.
///
/// Blank and comment-only lines are neither mapped nor reported; every other unmapped line is
/// listed in [`Registry::skipped`]. The registry has no `default`.
///
/// # Errors
///
/// None today (malformed lines are skipped, as libdat2 does); the `Result` keeps the signature
/// parallel to [`parse_toml`](super::parse_toml).
pub fn parse_dat_conf(
    text: &str,
    source: Source,
    known_providers: &[&str],
) -> Result<Registry, ConfigError> {
    let mut ias: Vec<IaEntry> = Vec::new();
    let mut skipped = Vec::new();
    for (index, raw) in text.split('\n').enumerate() {
        let line = index + 1;
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        match map_line(raw, known_providers, &ias) {
            Ok(None) => {}
            Ok(Some((name, provider, params))) => ias.push(IaEntry {
                name,
                provider,
                params,
                source: source.clone(),
                line: Some(line),
            }),
            Err(reason) => {
                tracing::debug!(%source, line, %reason, "dat.conf line skipped");
                skipped.push(SkippedLine { line, reason });
            }
        }
    }
    Ok(Registry {
        version: SUPPORTED_VERSION,
        default: None,
        ias,
        source,
        skipped,
    })
}

/// What one mapped line yields: the IA name, the provider and its params.
type Mapped = (String, String, toml::Table);

/// Map one line: `Ok(None)` for blank/comment lines, `Err(reason)` for skipped ones.
fn map_line(line: &str, known: &[&str], earlier: &[IaEntry]) -> Result<Option<Mapped>, String> {
    let fields = tokenize(line)?;
    let [
        name,
        api,
        thread_safety,
        default,
        library,
        _provider_version,
        ia_params,
        _platform,
    ] = match <[String; 8]>::try_from(fields) {
        Ok(f) => f,
        Err(f) if f.is_empty() => return Ok(None),
        Err(f) => {
            return Err(format!(
                "malformed: {} field(s), a dat.conf entry has 8 (ia_name api_version \
                     thread_safety default library provider_version ia_params platform_params)",
                f.len()
            ));
        }
    };

    check_api_version(&api)?;
    match thread_safety.as_str() {
        "threadsafe" | "nonthreadsafe" => {}
        other => {
            return Err(format!(
                "malformed thread-safety field `{other}`; expected `threadsafe` or `nonthreadsafe`"
            ));
        }
    }
    match default.as_str() {
        "default" => {}
        "nondefault" => return Err("`nondefault` entry (libdat2 ignores these too)".to_owned()),
        other => {
            return Err(format!(
                "malformed default field `{other}`; expected `default` or `nondefault`"
            ));
        }
    }
    let provider = library_provider(&library, known)?;
    if let Some(problem) = name_problem(&name) {
        return Err(format!("invalid IA name: {problem}"));
    }
    let params = parse_params(&ia_params)?;
    if let Some(first) = earlier.iter().find(|ia| ia.name == name) {
        return Err(format!(
            "duplicate IA name `{name}` (first defined on line {}; the first entry wins)",
            first.line.unwrap_or(0)
        ));
    }
    Ok(Some((name, provider.to_owned(), params)))
}

/// Only `u2.0` entries match a DAT 2.0 consumer.
fn check_api_version(api: &str) -> Result<(), String> {
    let (kind, rest) = match api.split_at_checked(1) {
        Some((k @ ("u" | "k"), rest)) => (k, rest),
        _ => {
            return Err(format!(
                "malformed API version `{api}`; expected u<major>.<minor>"
            ));
        }
    };
    let numeric = rest
        .split_once('.')
        .and_then(|(major, minor)| Some((major.parse::<u32>().ok()?, minor.parse::<u32>().ok()?)));
    match (kind, numeric) {
        (_, None) => Err(format!(
            "malformed API version `{api}`; expected u<major>.<minor>"
        )),
        ("k", Some(_)) => Err(format!(
            "kDAT entry (API version `{api}`); only uDAT (`u`) entries are used"
        )),
        (_, Some((2, 0))) => Ok(()),
        (_, Some(_)) => Err(format!(
            "API version `{api}`; only `u2.0` entries match a DAT 2.0 consumer"
        )),
    }
}

/// The provider a library field names: `tcp`, or `[dir/]libdat-tcp.so[.N...]`.
fn library_provider<'k>(library: &str, known: &[&'k str]) -> Result<&'k str, String> {
    let known_list = || known.join(", ");
    if let Some(p) = known.iter().find(|p| **p == library) {
        return Ok(p);
    }
    let base = library.rsplit('/').next().unwrap_or(library);
    if let Some(rest) = base.strip_prefix("libdat-") {
        let (provider, suffix) = rest.split_once(".so").unwrap_or((rest, "?"));
        let versioned = suffix.is_empty()
            || suffix.strip_prefix('.').is_some_and(|v| {
                v.split('.')
                    .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
            });
        if versioned {
            return match known.iter().find(|p| **p == provider) {
                Some(p) => Ok(p),
                None => Err(format!(
                    "library `{library}` names provider `{provider}`, which is not one of {}",
                    known_list()
                )),
            };
        }
    }
    if base.starts_with("libdat_capi.so") {
        return Err(format!(
            "library `{library}` is datrs's C ABI for the stock libdat2, not a native datrs \
             provider"
        ));
    }
    Err(format!(
        "library `{library}` is not a datrs provider (expected one of {} or libdat-<provider>.so)",
        known_list()
    ))
}

/// `key=value key=value` from the ia_params field.
fn parse_params(field: &str) -> Result<toml::Table, String> {
    let mut params = toml::Table::new();
    for word in field.split_whitespace() {
        let Some((key, value)) = word.split_once('=').filter(|(k, _)| !k.is_empty()) else {
            return Err(format!(
                "ia_params word `{word}` is not key=value (OFA-style \"<device> <port>\" params \
                 are not used by datrs providers)"
            ));
        };
        let value = if let Ok(i) = value.parse::<i64>() {
            toml::Value::Integer(i)
        } else if value == "true" {
            toml::Value::Boolean(true)
        } else if value == "false" {
            toml::Value::Boolean(false)
        } else {
            toml::Value::String(value.to_owned())
        };
        if params.insert(key.to_owned(), value).is_some() {
            return Err(format!("ia_params key `{key}` given twice"));
        }
    }
    Ok(params)
}

/// Split a line into fields: whitespace separates, `#` outside quotes starts a comment, a field
/// starting with `"` runs to the closing quote and may contain whitespace and `\x` escapes.
fn tokenize(line: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        match chars.next() {
            None | Some('#') => return Ok(fields),
            Some('"') => {
                let mut field = String::new();
                loop {
                    match chars.next() {
                        None => {
                            return Err(format!(
                                "malformed: unterminated quoted string in field {}",
                                fields.len() + 1
                            ));
                        }
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c) => field.push(c),
                            None => {
                                return Err(format!(
                                    "malformed: unterminated quoted string in field {}",
                                    fields.len() + 1
                                ));
                            }
                        },
                        Some(c) => field.push(c),
                    }
                }
                if chars
                    .peek()
                    .is_some_and(|c| !c.is_whitespace() && *c != '#')
                {
                    return Err(format!(
                        "malformed: text right after the closing quote of field {}",
                        fields.len() + 1
                    ));
                }
                fields.push(field);
            }
            Some(first) => {
                let mut field = String::from(first);
                while let Some(c) = chars.next_if(|c| !c.is_whitespace() && *c != '#') {
                    field.push(c);
                }
                fields.push(field);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::KNOWN_PROVIDERS;
    use std::path::PathBuf;

    /// An excerpt of Debian's `/etc/dat.conf` (dapl2 package) followed by datrs lines.
    const DEBIAN_PLUS_OURS: &str = r#"# DAT v2.0
#
# Note: Both API and Provider versions are based on DAT specification, v2.0
#
# Each entry should have the following fields:
#
# <ia_name> <api_version> <threadsafety> <default> <lib_path> \
#           <provider_version> <ia_params> <platform_params>
#
ofa-v2-mlx4_0-1 u2.0 nonthreadsafe default libdaploscm.so.2 dapl.2.0 "mlx4_0 1" ""
ofa-v2-ib0 u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 "ib0 0" ""
ofa-v2-mlx5_0-1u u2.0 nonthreadsafe default libdaploucm.so.2 dapl.2.0 "mlx5_0 1" ""
ofa-v2-mcm-1 u2.0 nonthreadsafe default libdaplomcm.so.2 dapl.2.0 "mlx4_0 1" ""

# datrs
tcp-lo u2.0 nonthreadsafe default libdat-tcp.so dapl.2.0 "address=127.0.0.1" ""
shm0 u2.0 threadsafe default shm dapl.2.0 "" ""
verbs0 u2.0 nonthreadsafe default /usr/lib/x86_64-linux-gnu/libdat-verbs.so.1 dapl.2.0 "device=mlx5_0 port=1 inline=false" "" # trailing comment
rustprov u2.0 nonthreadsafe default /abs/path/libdat_capi.so dapl.2.0 "lo 0" ""
old u1.2 nonthreadsafe default libdat-tcp.so dapl.1.2 "" ""
kern k2.0 nonthreadsafe default libdat-tcp.so dapl.2.0 "" ""
off u2.0 nonthreadsafe nondefault libdat-tcp.so dapl.2.0 "" ""
tcp-lo u2.0 nonthreadsafe default libdat-tcp.so dapl.2.0 "" ""
short u2.0 nonthreadsafe default
"#;

    fn src() -> Source {
        Source::File(PathBuf::from("/etc/dat.conf"))
    }

    fn parse(text: &str) -> Registry {
        match parse_dat_conf(text, src(), KNOWN_PROVIDERS) {
            Ok(r) => r,
            Err(e) => panic!("dat.conf parse failed: {e}"),
        }
    }

    #[test]
    fn debian_file_plus_ours() {
        let r = parse(DEBIAN_PLUS_OURS);
        assert_eq!(r.default, None);
        assert_eq!(r.version, 1);
        assert_eq!(r.source, src());
        let got: Vec<(&str, &str, Option<usize>)> = r
            .ias
            .iter()
            .map(|ia| (ia.name.as_str(), ia.provider.as_str(), ia.line))
            .collect();
        assert_eq!(
            got,
            [
                ("tcp-lo", "tcp", Some(16)),
                ("shm0", "shm", Some(17)),
                ("verbs0", "verbs", Some(18))
            ]
        );
        let tcp = &r.ias[0];
        assert_eq!(
            tcp.params.get("address"),
            Some(&toml::Value::String("127.0.0.1".into()))
        );
        assert_eq!(tcp.source, src());
        assert!(r.ias[1].params.is_empty());
        let verbs = &r.ias[2].params;
        assert_eq!(
            verbs.get("device"),
            Some(&toml::Value::String("mlx5_0".into()))
        );
        assert_eq!(verbs.get("port"), Some(&toml::Value::Integer(1)));
        assert_eq!(verbs.get("inline"), Some(&toml::Value::Boolean(false)));
        assert_eq!(verbs.len(), 3);

        let skipped: Vec<(usize, &str)> = r
            .skipped
            .iter()
            .map(|s| (s.line, s.reason.as_str()))
            .collect();
        assert_eq!(
            skipped,
            [
                (
                    10,
                    "library `libdaploscm.so.2` is not a datrs provider (expected one of tcp, shm, verbs or libdat-<provider>.so)"
                ),
                (
                    11,
                    "library `libdaplofa.so.2` is not a datrs provider (expected one of tcp, shm, verbs or libdat-<provider>.so)"
                ),
                (
                    12,
                    "library `libdaploucm.so.2` is not a datrs provider (expected one of tcp, shm, verbs or libdat-<provider>.so)"
                ),
                (
                    13,
                    "library `libdaplomcm.so.2` is not a datrs provider (expected one of tcp, shm, verbs or libdat-<provider>.so)"
                ),
                (
                    19,
                    "library `/abs/path/libdat_capi.so` is datrs's C ABI for the stock libdat2, not a native datrs provider"
                ),
                (
                    20,
                    "API version `u1.2`; only `u2.0` entries match a DAT 2.0 consumer"
                ),
                (
                    21,
                    "kDAT entry (API version `k2.0`); only uDAT (`u`) entries are used"
                ),
                (22, "`nondefault` entry (libdat2 ignores these too)"),
                (
                    23,
                    "duplicate IA name `tcp-lo` (first defined on line 16; the first entry wins)"
                ),
                (
                    24,
                    "malformed: 4 field(s), a dat.conf entry has 8 (ia_name api_version thread_safety default library provider_version ia_params platform_params)"
                ),
            ]
        );
    }

    #[test]
    fn the_real_debian_file_maps_nothing() {
        // Every OFA line is skipped, comments and blank lines are not reported.
        let text: String = DEBIAN_PLUS_OURS
            .lines()
            .take(14)
            .collect::<Vec<_>>()
            .join("\n");
        let r = parse(&text);
        assert!(r.ias.is_empty());
        assert_eq!(r.skipped.len(), 4);
        assert!(parse("").ias.is_empty());
        assert!(parse("").skipped.is_empty());
    }

    /// One-line files: the reason each is skipped (or `None` when it maps).
    #[test]
    fn line_table() {
        let table: &[(&str, Option<&str>)] = &[
            (r#"a u2.0 threadsafe default tcp x "" """#, None),
            (
                r#"a u2.0 nonthreadsafe default libdat-shm.so x "" """#,
                None,
            ),
            (
                r#"a u2.0 nonthreadsafe default libdat-shm.so.2.1 x "" """#,
                None,
            ),
            (
                r#"a u2.0 nonthreadsafe default ./lib/libdat-tcp.so x "" """#,
                None,
            ),
            (r#"a u2.0 nonthreadsafe default tcp x "k=v" "" # c"#, None),
            (
                r##"a u2.0 nonthreadsafe default tcp x "" ""#comment"##,
                None,
            ),
            (
                // Words are split at whitespace; inner quotes do not group.
                r#"a u2.0 nonthreadsafe default tcp x "p=\"q r\"" """#,
                Some(
                    "ia_params word `r\"` is not key=value (OFA-style \"<device> <port>\" params are not used by datrs providers)",
                ),
            ),
            ("a u2.0 nonthreadsafe default tcp x k=v y", None),
            (
                r#"a u2.0 nonthreadsafe default libdat-foo.so x "" """#,
                Some(
                    "library `libdat-foo.so` names provider `foo`, which is not one of tcp, shm, verbs",
                ),
            ),
            (
                r#"a u2.0 nonthreadsafe default libdat-tcp.so.x x "" """#,
                Some(
                    "library `libdat-tcp.so.x` is not a datrs provider (expected one of tcp, shm, verbs or libdat-<provider>.so)",
                ),
            ),
            (
                r#"a u2.0 nonthreadsafe default libdat-tcp x "" """#,
                Some(
                    "library `libdat-tcp` is not a datrs provider (expected one of tcp, shm, verbs or libdat-<provider>.so)",
                ),
            ),
            (
                r#"a u2.0 nonthreadsafe default TCP x "" """#,
                Some(
                    "library `TCP` is not a datrs provider (expected one of tcp, shm, verbs or libdat-<provider>.so)",
                ),
            ),
            (
                r#"a u2.0 nonthreadsafe default tcp x "mlx5_0 1" """#,
                Some(
                    "ia_params word `mlx5_0` is not key=value (OFA-style \"<device> <port>\" params are not used by datrs providers)",
                ),
            ),
            (
                r#"a u2.0 nonthreadsafe default tcp x "=v" """#,
                Some(
                    "ia_params word `=v` is not key=value (OFA-style \"<device> <port>\" params are not used by datrs providers)",
                ),
            ),
            (
                r#"a u2.0 nonthreadsafe default tcp x "k=1 k=2" """#,
                Some("ia_params key `k` given twice"),
            ),
            (
                r#"a u2.0 sometimes default tcp x "" """#,
                Some(
                    "malformed thread-safety field `sometimes`; expected `threadsafe` or `nonthreadsafe`",
                ),
            ),
            (
                r#"a u2.0 threadsafe maybe tcp x "" """#,
                Some("malformed default field `maybe`; expected `default` or `nondefault`"),
            ),
            (
                r#"a v2.0 threadsafe default tcp x "" """#,
                Some("malformed API version `v2.0`; expected u<major>.<minor>"),
            ),
            (
                r#"a u2 threadsafe default tcp x "" """#,
                Some("malformed API version `u2`; expected u<major>.<minor>"),
            ),
            (
                r#"a u2.x threadsafe default tcp x "" """#,
                Some("malformed API version `u2.x`; expected u<major>.<minor>"),
            ),
            (
                r#"a "" threadsafe default tcp x "" """#,
                Some("malformed API version ``; expected u<major>.<minor>"),
            ),
            (
                r#"a u2.1 threadsafe default tcp x "" """#,
                Some("API version `u2.1`; only `u2.0` entries match a DAT 2.0 consumer"),
            ),
            (
                r#""" u2.0 threadsafe default tcp x "" """#,
                Some("invalid IA name: IA name is empty"),
            ),
            (
                r#""a b" u2.0 threadsafe default tcp x "" """#,
                Some("invalid IA name: IA name `a b` contains whitespace or control characters"),
            ),
            (
                r#"a u2.0 threadsafe default tcp x "open"#,
                Some("malformed: unterminated quoted string in field 7"),
            ),
            (
                r#"a u2.0 threadsafe default tcp x "open\"#,
                Some("malformed: unterminated quoted string in field 7"),
            ),
            (
                r#"a u2.0 threadsafe default tcp x "k=v"x "" "#,
                Some("malformed: text right after the closing quote of field 7"),
            ),
            (
                r#"a u2.0 threadsafe default tcp x "" "" extra"#,
                Some(
                    "malformed: 9 field(s), a dat.conf entry has 8 (ia_name api_version thread_safety default library provider_version ia_params platform_params)",
                ),
            ),
        ];
        for (line, want) in table {
            let r = parse(line);
            match want {
                None => {
                    assert!(r.skipped.is_empty(), "{line}: {:?}", r.skipped);
                    assert_eq!(r.ias.len(), 1, "{line}");
                }
                Some(reason) => {
                    assert!(r.ias.is_empty(), "{line}");
                    assert_eq!(
                        r.skipped,
                        [SkippedLine {
                            line: 1,
                            reason: (*reason).to_owned()
                        }],
                        "{line}"
                    );
                }
            }
        }
    }

    #[test]
    fn quoting_and_params() {
        let r = parse("  a\tu2.0 threadsafe default tcp x \"p=\\\"q\\\\r\\\" n=-5\" \"\"\r\n");
        let p = &r.ias[0].params;
        assert_eq!(p.get("p"), Some(&toml::Value::String("\"q\\r\"".into())));
        assert_eq!(p.get("n"), Some(&toml::Value::Integer(-5)));
        // An overlong name is skipped; 255 bytes is fine.
        let long = "n".repeat(255);
        assert_eq!(
            parse(&format!("{long} u2.0 threadsafe default tcp x \"\" \"\""))
                .ias
                .len(),
            1
        );
        let r = parse(&format!("{long}x u2.0 threadsafe default tcp x \"\" \"\""));
        assert_eq!(
            r.skipped[0].reason,
            "invalid IA name: IA name is 256 bytes long; at most 255 are allowed"
        );
    }

    #[test]
    fn known_providers_are_the_callers() {
        let r = match parse_dat_conf("a u2.0 threadsafe default tcp x \"\" \"\"", src(), &["shm"]) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        };
        assert!(r.ias.is_empty());
        assert_eq!(
            r.skipped[0].reason,
            "library `tcp` is not a datrs provider (expected one of shm or libdat-<provider>.so)"
        );
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        for text in [
            "\"",
            "\\",
            "#",
            "\"\\",
            "a\u{0}b",
            "é \"é",
            "\n\n\r\r\n",
            "libdat-.so",
        ] {
            let _ = parse(text);
        }
    }
}
