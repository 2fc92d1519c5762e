//! Finding the registry: `$DAT_CONF`, the user's file, `/etc/dat/dat.toml`, the embedded one.

use std::path::{Path, PathBuf};

use super::{
    ConfigError, ConfigErrorKind, Environment, Registry, Source, parse_dat_conf, parse_toml,
};

/// The system-wide registry.
pub const ETC_PATH: &str = "/etc/dat/dat.toml";

/// The registry files consulted after `$DAT_CONF`, in order: the user's file (when
/// `$XDG_CONFIG_HOME` or `$HOME` allows one) and [`ETC_PATH`].
///
/// `$XDG_CONFIG_HOME` counts only when it is an absolute path (as the XDG base directory
/// specification says); otherwise `$HOME/.config` is used when `$HOME` is set and non-empty.
pub fn search_path(env: &dyn Environment) -> Vec<PathBuf> {
    let xdg = env
        .var("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    let config_home = xdg.or_else(|| {
        env.var("HOME")
            .filter(|h| !h.is_empty())
            .map(|h| Path::new(&h).join(".config"))
    });
    let mut paths: Vec<PathBuf> = config_home
        .map(|dir| dir.join("dat").join("dat.toml"))
        .into_iter()
        .collect();
    paths.push(PathBuf::from(ETC_PATH));
    paths
}

/// Whether a `$DAT_CONF` file is a TOML registry (rather than a classic dat.conf): its name ends
/// in `.toml`, or its first line that is neither blank nor a `#` comment starts with `[` or
/// with a key followed by `=` (`version = 1`). A file with no such line is a dat.conf.
pub fn looks_like_toml(path: &Path, text: &str) -> bool {
    if path.extension().is_some_and(|e| e == "toml") {
        return true;
    }
    let Some(first) = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
    else {
        return false;
    };
    if first.starts_with('[') {
        return true;
    }
    // A bare or quoted key, optional whitespace, then `=`.
    let mut quote: Option<char> = None;
    let mut after_key = false;
    for c in first.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '=' => return true,
            None if c.is_whitespace() => after_key = true,
            None if after_key => return false,
            None if c == '"' || c == '\'' => quote = Some(c),
            None => {}
        }
    }
    false
}

/// Load the registry: `$DAT_CONF`, else the first existing file of [`search_path`], else
/// `embedded` (the caller's `include_str!` of `config/dat.toml`).
///
/// A `$DAT_CONF` file is parsed as TOML or as a classic dat.conf according to
/// [`looks_like_toml`]; the other files are always TOML. See the [module docs](super).
///
/// # Errors
///
/// All map to `DAT_PROVIDER_NOT_FOUND | DAT_NO_SUBTYPE` ([`ConfigError::dat_error`]):
/// * [`ConfigErrorKind::NotFound`]: `$DAT_CONF` names a file that does not exist;
/// * [`ConfigErrorKind::Unreadable`]: `$DAT_CONF`, or a file of the search path that exists,
///   cannot be read;
/// * any [`parse_toml`] error of the file chosen (including the embedded registry).
pub fn resolve(
    env: &dyn Environment,
    embedded: &str,
    known_providers: &[&str],
) -> Result<Registry, ConfigError> {
    if let Some(value) = env.var("DAT_CONF").filter(|v| !v.is_empty()) {
        let path = PathBuf::from(value);
        let source = Source::File(path.clone());
        return match env.read_file(&path) {
            Ok(Some(text)) => {
                if looks_like_toml(&path, &text) {
                    tracing::debug!(path = %path.display(), "registry from $DAT_CONF (TOML)");
                    parse_toml(&text, source, known_providers)
                } else {
                    tracing::debug!(path = %path.display(), "registry from $DAT_CONF (dat.conf)");
                    parse_dat_conf(&text, source, known_providers)
                }
            }
            Ok(None) => Err(ConfigError::new(
                ConfigErrorKind::NotFound,
                source,
                None,
                None,
                "$DAT_CONF names this file, which does not exist",
            )),
            Err(e) => Err(ConfigError::new(
                ConfigErrorKind::Unreadable,
                source,
                None,
                None,
                format!("$DAT_CONF names this file, which cannot be read: {e}"),
            )),
        };
    }
    for path in search_path(env) {
        match env.read_file(&path) {
            Ok(Some(text)) => {
                tracing::debug!(path = %path.display(), "registry file");
                return parse_toml(&text, Source::File(path), known_providers);
            }
            Ok(None) => {}
            Err(e) => {
                return Err(ConfigError::new(
                    ConfigErrorKind::Unreadable,
                    Source::File(path),
                    None,
                    None,
                    format!("registry file exists but cannot be read: {e}"),
                ));
            }
        }
    }
    tracing::debug!("embedded registry");
    parse_toml(embedded, Source::Embedded, known_providers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::KNOWN_PROVIDERS;
    use crate::config::fake::FakeEnv;
    use crate::error::{DatError, ErrorType, Subtype};

    const EMBEDDED: &str = include_str!("../../../config/dat.toml");

    fn toml_with(name: &str) -> String {
        format!("version = 1\n[[ia]]\nname = \"{name}\"\nprovider = \"tcp\"\n")
    }

    fn ok(env: &FakeEnv, embedded: &str) -> Registry {
        match resolve(env, embedded, KNOWN_PROVIDERS) {
            Ok(r) => r,
            Err(e) => panic!("resolve failed: {e}"),
        }
    }

    fn err(env: &FakeEnv, embedded: &str) -> ConfigError {
        match resolve(env, embedded, KNOWN_PROVIDERS) {
            Ok(r) => panic!("resolve succeeded from {}", r.source),
            Err(e) => e,
        }
    }

    fn file(p: &str) -> Source {
        Source::File(PathBuf::from(p))
    }

    const XDG_FILE: &str = "/xdg/dat/dat.toml";
    const HOME_FILE: &str = "/home/u/.config/dat/dat.toml";

    #[test]
    fn embedded_default_parses() {
        let r = match parse_toml(EMBEDDED, Source::Embedded, KNOWN_PROVIDERS) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(r.default.as_deref(), Some("tcp-lo"));
        let names: Vec<(&str, &str)> = r
            .ias
            .iter()
            .map(|ia| (ia.name.as_str(), ia.provider.as_str()))
            .collect();
        assert_eq!(names, [("tcp-lo", "tcp"), ("shm0", "shm")]);
        assert_eq!(
            r.ias[0].params.get("address"),
            Some(&toml::Value::String("127.0.0.1".into()))
        );
        assert!(r.ias[1].params.is_empty());
        let chosen = r
            .choose(None, &FakeEnv::default())
            .map(|ia| ia.name.as_str());
        assert_eq!(chosen, Ok("tcp-lo"));
    }

    #[test]
    fn examples_parse() {
        let examples = [
            (
                "verbs.toml",
                include_str!("../../../config/examples/verbs.toml"),
            ),
            (
                "tcp-multihost.toml",
                include_str!("../../../config/examples/tcp-multihost.toml"),
            ),
            (
                "shm.toml",
                include_str!("../../../config/examples/shm.toml"),
            ),
        ];
        for (name, text) in examples {
            let r = parse_toml(text, file(name), KNOWN_PROVIDERS);
            let r = match r {
                Ok(r) => r,
                Err(e) => panic!("{e}"),
            };
            assert!(r.choose(None, &FakeEnv::default()).is_ok(), "{name}");
            assert!(looks_like_toml(Path::new("x"), text), "{name}");
        }
    }

    #[test]
    fn nothing_configured_uses_embedded() {
        let r = ok(&FakeEnv::default(), EMBEDDED);
        assert_eq!(r.source, Source::Embedded);
        assert_eq!(r.ias[0].source, Source::Embedded);
        // Empty variables count as unset.
        let env = FakeEnv::default()
            .var("DAT_CONF", "")
            .var("XDG_CONFIG_HOME", "")
            .var("HOME", "");
        assert_eq!(ok(&env, EMBEDDED).source, Source::Embedded);
    }

    #[test]
    fn order_dat_conf_then_user_then_etc_then_embedded() {
        let all = FakeEnv::default()
            .var("DAT_CONF", "/cfg/mine.toml")
            .var("HOME", "/home/u")
            .file("/cfg/mine.toml", &toml_with("from-dat-conf"))
            .file(HOME_FILE, &toml_with("from-home"))
            .file(ETC_PATH, &toml_with("from-etc"));
        let r = ok(&all, EMBEDDED);
        assert_eq!(r.source, file("/cfg/mine.toml"));
        assert_eq!(r.ias[0].name, "from-dat-conf");
        assert_eq!(r.ias[0].source, file("/cfg/mine.toml"));

        let no_dat_conf = FakeEnv::default()
            .var("HOME", "/home/u")
            .file(HOME_FILE, &toml_with("from-home"))
            .file(ETC_PATH, &toml_with("from-etc"));
        assert_eq!(ok(&no_dat_conf, EMBEDDED).source, file(HOME_FILE));

        let etc_only = FakeEnv::default()
            .var("HOME", "/home/u")
            .file(ETC_PATH, &toml_with("from-etc"));
        let r = ok(&etc_only, EMBEDDED);
        assert_eq!(r.source, file(ETC_PATH));
        assert_eq!(r.ias[0].name, "from-etc");
    }

    #[test]
    fn xdg_config_home_replaces_home() {
        let env = FakeEnv::default()
            .var("XDG_CONFIG_HOME", "/xdg")
            .var("HOME", "/home/u")
            .file(XDG_FILE, &toml_with("from-xdg"))
            .file(HOME_FILE, &toml_with("from-home"));
        assert_eq!(ok(&env, EMBEDDED).source, file(XDG_FILE));
        assert_eq!(
            search_path(&env),
            [PathBuf::from(XDG_FILE), PathBuf::from(ETC_PATH)]
        );

        // With XDG set, the HOME file is not consulted even if the XDG one is missing.
        let env = FakeEnv::default()
            .var("XDG_CONFIG_HOME", "/xdg")
            .var("HOME", "/home/u")
            .file(HOME_FILE, &toml_with("from-home"));
        assert_eq!(ok(&env, EMBEDDED).source, Source::Embedded);

        // A relative XDG_CONFIG_HOME is ignored (XDG base directory specification).
        let env = FakeEnv::default()
            .var("XDG_CONFIG_HOME", "relative")
            .var("HOME", "/home/u")
            .file(HOME_FILE, &toml_with("from-home"));
        assert_eq!(ok(&env, EMBEDDED).source, file(HOME_FILE));
        assert_eq!(search_path(&FakeEnv::default()), [PathBuf::from(ETC_PATH)]);
    }

    #[test]
    fn dat_conf_classic_file_is_detected() {
        let conf = "# comment\n\nofa-v2-ib0 u2.0 nonthreadsafe default libdaplofa.so.2 \
                    dapl.2.0 \"ib0 0\" \"\"\n\
                    t u2.0 nonthreadsafe default libdat-tcp.so dapl.2.0 \"address=1.2.3.4\" \"\"\n";
        let env = FakeEnv::default()
            .var("DAT_CONF", "/etc/dat.conf")
            .file("/etc/dat.conf", conf)
            .file(ETC_PATH, &toml_with("from-etc"));
        let r = ok(&env, EMBEDDED);
        assert_eq!(r.source, file("/etc/dat.conf"));
        assert_eq!(r.ias.len(), 1);
        assert_eq!(r.ias[0].name, "t");
        assert_eq!(r.ias[0].line, Some(4));
        assert_eq!(r.skipped.len(), 1);
        assert_eq!(r.skipped[0].line, 3);
        // One mapped IA and no default: it is chosen.
        assert_eq!(
            r.choose(None, &FakeEnv::default())
                .map(|ia| ia.name.as_str()),
            Ok("t")
        );
    }

    #[test]
    fn dat_conf_toml_is_detected_by_content_or_extension() {
        let env = FakeEnv::default()
            .var("DAT_CONF", "/cfg/registry")
            .file("/cfg/registry", &format!("# mine\n\n{}", toml_with("x")));
        assert_eq!(ok(&env, EMBEDDED).ias[0].name, "x");
        // A broken TOML file named .toml reports a TOML error rather than being a dat.conf.
        let env = FakeEnv::default().var("DAT_CONF", "/cfg/r.toml").file(
            "/cfg/r.toml",
            "a u2.0 nonthreadsafe default tcp x \"\" \"\"\n",
        );
        let e = err(&env, EMBEDDED);
        assert_eq!(e.kind, ConfigErrorKind::Syntax);
        assert_eq!(e.source, file("/cfg/r.toml"));
        assert_eq!(e.line, Some(1));
    }

    #[test]
    fn looks_like_toml_table() {
        let table = [
            ("version = 1", true),
            ("version=1", true),
            ("  # c\n\n[[ia]]", true),
            ("[ia]", true),
            ("\"quoted key\" = 1", true),
            ("'k' = 1", true),
            ("a.b = 1", true),
            ("a u2.0 nonthreadsafe default tcp x \"k=v\" \"\"", false),
            ("\"a b\" u2.0 nonthreadsafe default tcp x \"\" \"\"", false),
            ("# only = comments", false),
            ("", false),
            ("\"unterminated = 1", false),
        ];
        for (text, want) in table {
            assert_eq!(
                looks_like_toml(Path::new("/etc/dat.conf"), text),
                want,
                "{text}"
            );
        }
        assert!(looks_like_toml(Path::new("/x/y.toml"), ""));
    }

    #[test]
    fn dat_conf_missing_is_an_error_without_fallback() {
        let env = FakeEnv::default()
            .var("DAT_CONF", "/nope.toml")
            .file(ETC_PATH, &toml_with("from-etc"));
        let e = err(&env, EMBEDDED);
        assert_eq!(e.kind, ConfigErrorKind::NotFound);
        assert_eq!(e.source, file("/nope.toml"));
        assert_eq!(
            e.to_string(),
            "/nope.toml: $DAT_CONF names this file, which does not exist"
        );
        assert_eq!(
            e.dat_error(),
            DatError::new(ErrorType::ProviderNotFound, Subtype::NoSubtype)
        );
    }

    #[test]
    fn dat_conf_unreadable_is_an_error() {
        let env = FakeEnv::default()
            .var("DAT_CONF", "/secret.toml")
            .unreadable("/secret.toml");
        let e = err(&env, EMBEDDED);
        assert_eq!(e.kind, ConfigErrorKind::Unreadable);
        assert_eq!(
            e.to_string(),
            "/secret.toml: $DAT_CONF names this file, which cannot be read: permission denied"
        );
    }

    #[test]
    fn unreadable_search_path_file_is_an_error() {
        let env = FakeEnv::default()
            .var("HOME", "/home/u")
            .unreadable(HOME_FILE)
            .file(ETC_PATH, &toml_with("from-etc"));
        let e = err(&env, EMBEDDED);
        assert_eq!(e.kind, ConfigErrorKind::Unreadable);
        assert_eq!(e.source, file(HOME_FILE));
        let env = FakeEnv::default().unreadable(ETC_PATH);
        assert_eq!(err(&env, EMBEDDED).source, file(ETC_PATH));
    }

    #[test]
    fn broken_file_is_an_error_without_fallback() {
        let env = FakeEnv::default()
            .var("HOME", "/home/u")
            .file(HOME_FILE, "version = 1\nbogus = 2\n")
            .file(ETC_PATH, &toml_with("from-etc"));
        let e = err(&env, EMBEDDED);
        assert_eq!(e.kind, ConfigErrorKind::UnknownKey);
        assert_eq!(
            e.to_string(),
            format!(
                "{HOME_FILE}:2: unknown key `bogus` at top level; expected `version`, \
                 `default` or `[[ia]]`"
            )
        );
    }

    #[test]
    fn broken_embedded_registry_is_reported_as_embedded() {
        let e = err(&FakeEnv::default(), "version = 2\n");
        assert_eq!(e.kind, ConfigErrorKind::UnsupportedVersion);
        assert_eq!(
            e.to_string(),
            "<embedded config/dat.toml>:1: unsupported `version` 2; this program supports \
             version 1"
        );
    }

    fn registry(text: &str) -> Registry {
        match parse_toml(text, file("/r.toml"), KNOWN_PROVIDERS) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        }
    }

    const TWO: &str = "version = 1\ndefault = \"b\"\n\
                       [[ia]]\nname = \"a\"\nprovider = \"tcp\"\n\
                       [[ia]]\nname = \"b\"\nprovider = \"shm\"\n";

    fn chosen(r: &Registry, explicit: Option<&str>, env: &FakeEnv) -> Result<String, ConfigError> {
        r.choose(explicit, env).map(|ia| ia.name.clone())
    }

    #[test]
    fn choose_order_explicit_env_default() {
        let r = registry(TWO);
        let with_env = FakeEnv::default().var("DAT_IA", "a");
        let no_env = FakeEnv::default();
        let empty_env = FakeEnv::default().var("DAT_IA", "");
        assert_eq!(chosen(&r, Some("b"), &with_env), Ok("b".into()));
        assert_eq!(chosen(&r, Some("a"), &no_env), Ok("a".into()));
        assert_eq!(chosen(&r, None, &with_env), Ok("a".into()));
        assert_eq!(chosen(&r, None, &no_env), Ok("b".into()));
        assert_eq!(chosen(&r, None, &empty_env), Ok("b".into()));
        assert_eq!(r.get("a").map(|ia| ia.provider.as_str()), Some("tcp"));
        assert_eq!(r.get("zz"), None);
        assert_eq!(r.names().collect::<Vec<_>>(), ["a", "b"]);
    }

    #[test]
    fn choose_unknown_names() {
        let r = registry(TWO);
        let not_registered = DatError::new(ErrorType::ProviderNotFound, Subtype::NameNotRegistered);

        let e = match chosen(&r, Some("nope"), &FakeEnv::default().var("DAT_IA", "a")) {
            Err(e) => e,
            Ok(n) => panic!("chose {n}"),
        };
        assert_eq!(e.kind, ConfigErrorKind::UnknownIa);
        assert_eq!(e.dat_error(), not_registered);
        assert_eq!(e.source, file("/r.toml"));
        assert_eq!(
            e.to_string(),
            "/r.toml: unknown IA `nope` (named by the application); known IAs: `a`, `b`"
        );

        let e = match chosen(&r, None, &FakeEnv::default().var("DAT_IA", "typo")) {
            Err(e) => e,
            Ok(n) => panic!("chose {n}"),
        };
        assert_eq!(e.kind, ConfigErrorKind::UnknownIa);
        assert_eq!(
            e.message,
            "unknown IA `typo` (named by $DAT_IA); known IAs: `a`, `b`"
        );

        // An explicit empty name is looked up (and not found), not treated as "no name".
        let e = match chosen(&r, Some(""), &FakeEnv::default()) {
            Err(e) => e,
            Ok(n) => panic!("chose {n}"),
        };
        assert_eq!(e.kind, ConfigErrorKind::UnknownIa);
    }

    #[test]
    fn choose_without_default() {
        let one = registry("version = 1\n[[ia]]\nname = \"only\"\nprovider = \"verbs\"\n");
        assert_eq!(chosen(&one, None, &FakeEnv::default()), Ok("only".into()));

        let two = registry(
            "version = 1\n[[ia]]\nname = \"a\"\nprovider = \"tcp\"\n\
             [[ia]]\nname = \"b\"\nprovider = \"tcp\"\n",
        );
        let e = match chosen(&two, None, &FakeEnv::default()) {
            Err(e) => e,
            Ok(n) => panic!("chose {n}"),
        };
        assert_eq!(e.kind, ConfigErrorKind::NoIaChosen);
        assert_eq!(
            e.dat_error(),
            DatError::new(ErrorType::ProviderNotFound, Subtype::NameNotRegistered)
        );
        assert_eq!(
            e.message,
            "no IA chosen: pass a name, set $DAT_IA or set `default`; known IAs: `a`, `b`"
        );

        let none = registry("version = 1\n");
        let e = match chosen(&none, None, &FakeEnv::default()) {
            Err(e) => e,
            Ok(n) => panic!("chose {n}"),
        };
        assert_eq!(e.kind, ConfigErrorKind::NoIaChosen);
        assert!(
            e.message.ends_with("; the registry has no IAs"),
            "{}",
            e.message
        );
    }

    #[test]
    fn choose_in_a_dat_conf_with_nothing_mapped_explains_why() {
        let r = match parse_dat_conf(
            "\nofa-v2-ib0 u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 \"ib0 0\" \"\"\n",
            file("/etc/dat.conf"),
            KNOWN_PROVIDERS,
        ) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        };
        let e = match chosen(&r, Some("ofa-v2-ib0"), &FakeEnv::default()) {
            Err(e) => e,
            Ok(n) => panic!("chose {n}"),
        };
        assert_eq!(
            e.to_string(),
            "/etc/dat.conf: unknown IA `ofa-v2-ib0` (named by the application); the registry \
             has no IAs (1 dat.conf line(s) skipped; the first, line 2: library \
             `libdaplofa.so.2` is not a datrs provider (expected one of tcp, shm, verbs or \
             libdat-<provider>.so))"
        );
    }
}
