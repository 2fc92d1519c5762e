//! The registry: which providers are compiled in, which IAs the configuration names, and
//! opening an IA by name.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use dat_core::DatError;
use dat_core::config::{self, ConfigError, Environment, ProcessEnv, Registry as ConfigRegistry};
use dat_core::provider::{OpenError, Provider};

use crate::ia::Ia;

/// The embedded default registry (`config/dat.toml`), used when no file is found.
pub const EMBEDDED_CONFIG: &str = include_str!("../../config/dat.toml");

/// Why [`Registry::open_ia`] failed: the DAT code plus what to fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IaOpenError {
    code: DatError,
    message: String,
}

impl IaOpenError {
    /// The DAT return code (`DAT_PROVIDER_NOT_FOUND|DAT_NAME_NOT_REGISTERED` for an unknown
    /// IA name, the provider's code for a failed open).
    pub fn code(&self) -> DatError {
        self.code
    }

    /// The explanation (names the IA, the file and line, the key).
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for IaOpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for IaOpenError {}

impl From<ConfigError> for IaOpenError {
    fn from(e: ConfigError) -> IaOpenError {
        IaOpenError {
            code: e.dat_error(),
            message: e.to_string(),
        }
    }
}

impl From<OpenError> for IaOpenError {
    fn from(e: OpenError) -> IaOpenError {
        IaOpenError {
            code: e.code,
            message: e.message,
        }
    }
}

/// The providers compiled into this build, with their registry names.
// The pushes depend on the features: no `vec![]` literal fits every build.
#[allow(clippy::vec_init_then_push)]
fn builtin_providers() -> Vec<Arc<dyn Provider>> {
    #[allow(unused_mut)]
    let mut v: Vec<Arc<dyn Provider>> = Vec::new();
    #[cfg(feature = "tcp")]
    v.push(Arc::new(dat_provider_tcp::TcpProvider::new()));
    #[cfg(feature = "shm")]
    v.push(dat_provider_shm::ShmProvider::new());
    v
}

/// A set of providers plus a resolved configuration.
///
/// [`Registry::from_env`] resolves the configuration the standard way (`$DAT_CONF`, the user's
/// and the system's `dat.toml`, then the embedded default) with the providers compiled in.
/// Tests and embedders build one with [`Registry::new`] and add providers of their own.
pub struct Registry {
    providers: HashMap<&'static str, Arc<dyn Provider>>,
    config: ConfigRegistry,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("providers", &self.providers.keys().collect::<Vec<_>>())
            .field(
                "ias",
                &self.config.ias.iter().map(|i| &i.name).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Registry {
    /// Resolves the configuration from the process environment, with the compiled-in providers.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the file, line and key (for example `$DAT_CONF` set but
    /// unreadable, an unknown key, a duplicate IA name).
    pub fn from_env() -> Result<Registry, ConfigError> {
        Registry::resolve(&ProcessEnv, EMBEDDED_CONFIG, builtin_providers())
    }

    /// Resolves the configuration through `env` (injected, so tests never touch the process
    /// environment), with `providers` registered.
    ///
    /// # Errors
    /// As [`Registry::from_env`].
    pub fn resolve(
        env: &dyn Environment,
        embedded: &str,
        providers: Vec<Arc<dyn Provider>>,
    ) -> Result<Registry, ConfigError> {
        let config = config::resolve(env, embedded, &known_providers(&providers))?;
        Ok(Registry::new(config, providers))
    }

    /// A registry over an already parsed configuration.
    pub fn new(config: ConfigRegistry, providers: Vec<Arc<dyn Provider>>) -> Registry {
        let providers = providers.into_iter().map(|p| (p.name(), p)).collect();
        Registry { providers, config }
    }

    /// Adds (or replaces) a provider.
    pub fn add_provider(&mut self, p: Arc<dyn Provider>) {
        self.providers.insert(p.name(), p);
    }

    /// The resolved configuration.
    pub fn config(&self) -> &ConfigRegistry {
        &self.config
    }

    /// Names of the providers compiled in or added.
    pub fn provider_names(&self) -> Vec<&'static str> {
        let mut v: Vec<_> = self.providers.keys().copied().collect();
        v.sort_unstable();
        v
    }

    /// Opens the IA `name` (or, with `None`, `$DAT_IA`, then the configuration's default) with
    /// an async EVD of `async_qlen` events.
    ///
    /// # Errors
    /// `DAT_PROVIDER_NOT_FOUND|DAT_NAME_NOT_REGISTERED` for an unknown IA name,
    /// `DAT_PROVIDER_NOT_FOUND` for a provider that is not compiled in, and whatever the
    /// provider's open reports (each with a message naming the IA and the cause).
    pub fn open_ia(&self, name: Option<&str>, async_qlen: i32) -> Result<Ia, IaOpenError> {
        self.open_ia_with_env(name, async_qlen, &ProcessEnv)
    }

    /// [`Registry::open_ia`] with an injected environment (for `$DAT_IA`).
    ///
    /// # Errors
    /// As [`Registry::open_ia`].
    pub fn open_ia_with_env(
        &self,
        name: Option<&str>,
        async_qlen: i32,
        env: &dyn Environment,
    ) -> Result<Ia, IaOpenError> {
        let entry = self.config.choose(name, env)?;
        let Some(provider) = self.providers.get(entry.provider.as_str()) else {
            return Err(ConfigError::provider_not_compiled(entry, &self.provider_names()).into());
        };
        let origin = match entry.line {
            Some(l) => format!("{}:{}", entry.source, l),
            None => entry.source.to_string(),
        };
        Ia::open(
            provider.as_ref(),
            &entry.name,
            &entry.params,
            &origin,
            async_qlen,
        )
    }
}

fn known_providers(extra: &[Arc<dyn Provider>]) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = config::KNOWN_PROVIDERS.to_vec();
    for p in extra {
        if !v.contains(&p.name()) {
            v.push(p.name());
        }
    }
    v
}

/// Opens an IA by name through the standard configuration (see [`Registry::from_env`]), with
/// an async EVD of 8 events.
///
/// # Errors
/// As [`Registry::from_env`] and [`Registry::open_ia`].
pub fn open_ia(name: &str) -> Result<Ia, IaOpenError> {
    Registry::from_env()?.open_ia(Some(name), 8)
}

/// Opens the default IA (`$DAT_IA`, else the configuration's default).
///
/// # Errors
/// As [`open_ia`].
pub fn open_default_ia() -> Result<Ia, IaOpenError> {
    Registry::from_env()?.open_ia(None, 8)
}
