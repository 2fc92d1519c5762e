//! The conformance suite on the TCP provider over loopback (`tcp-lo`); every case is skipped
//! with the reason while the provider is not compiled into `dat`.

use dat_tests::RegistryTarget;

dat_tests::conformance_suite!(tcp, RegistryTarget::new("tcp-lo"));
