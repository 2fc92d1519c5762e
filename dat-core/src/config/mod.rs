//! Configuration: the TOML IA registry, its resolution order, and classic dat.conf files.
