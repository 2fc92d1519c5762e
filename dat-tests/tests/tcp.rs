//! The conformance suite on the TCP provider over loopback (`tcp-lo`).

use dat_tests::RegistryTarget;

dat_tests::conformance_suite!(
    tcp,
    RegistryTarget::new("tcp-lo").with_unreachable("224.0.0.1:0".parse().unwrap())
);
