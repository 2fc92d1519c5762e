//! The conformance suite on the shared-memory provider (`shm0`); every case is skipped with
//! the reason while the provider is not compiled into `dat`.

use dat_tests::RegistryTarget;

dat_tests::conformance_suite!(shm, RegistryTarget::new("shm0"));
