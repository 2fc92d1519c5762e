//! Opening a verbs IA through the `dat` facade. On a machine without RDMA (the development
//! machines and CI) every open must fail with `DAT_PROVIDER_NOT_FOUND` naming the cause; with
//! a device (the rxe VM, `../shared/rxe-vm/rxe-vm`) the IA opens and reports the device.

use std::path::Path;
use std::sync::Arc;

use dat::types::EvdFlags;
use dat::{EpParams, Registry};
use dat_core::config::{Source, parse_toml};
use dat_core::error::ErrorType;
use dat_provider_verbs::VerbsProvider;

fn registry(params: &str) -> Registry {
    let text = format!(
        "version = 1\n[[ia]]\nname = \"v\"\nprovider = \"verbs\"\nparams = {{ {params} }}\n"
    );
    let cfg = parse_toml(&text, Source::Embedded, &["tcp", "shm", "verbs"]).expect("config");
    Registry::new(cfg, vec![Arc::new(VerbsProvider::new())])
}

fn kernel_has_verbs() -> bool {
    Path::new("/sys/class/infiniband_verbs").exists()
}

fn has_device() -> bool {
    !dat_provider_verbs::device_names().is_empty()
}

#[test]
fn without_a_device_open_is_provider_not_found_naming_the_cause() {
    let r = registry("");
    if has_device() {
        // The VM: the first device opens, its attributes are the device's.
        let ia = r
            .open_ia(Some("v"), 8)
            .expect("open the first verbs device");
        assert_eq!(ia.provider_attr().provider_name, "verbs");
        assert!(ia.attr().max_eps > 0);
        assert!(ia.attr().max_evd_qlen > 0);
        assert!(
            ia.attr().transport_attr.iter().any(|a| a.name == "DEVICE"),
            "{:?}",
            ia.attr().transport_attr
        );
        return;
    }
    let e = r
        .open_ia(Some("v"), 8)
        .map(|_| ())
        .expect_err("no device: open fails");
    assert_eq!(e.code().kind(), ErrorType::ProviderNotFound, "{e}");
    let cause = if kernel_has_verbs() {
        "no RDMA device on this machine"
    } else {
        "the kernel has no RDMA support"
    };
    assert!(e.message().contains(cause), "{}", e.message());
    assert!(e.message().contains("IA `v`"), "{}", e.message());
    assert!(e.message().contains("rdma_rxe"), "{}", e.message());
}

#[test]
fn an_unknown_device_is_provider_not_found() {
    let e = registry("device = \"datrs-no-such-dev\", port = 1")
        .open_ia(Some("v"), 8)
        .map(|_| ())
        .expect_err("no such device");
    assert_eq!(e.code().kind(), ErrorType::ProviderNotFound, "{e}");
    if has_device() {
        assert!(e.message().contains("params.device"), "{}", e.message());
        let first = &dat_provider_verbs::device_names()[0];
        assert!(e.message().contains(first.as_str()), "{}", e.message());
    }
}

#[test]
fn an_address_without_an_rdma_device_is_provider_not_found() {
    // 192.0.2.77 (TEST-NET-1) is assigned nowhere, the VM's rxe0 has 192.0.2.1: the bind fails
    // before anything is sent.
    let e = registry("address = \"192.0.2.77\"")
        .open_ia(Some("v"), 8)
        .map(|_| ())
        .expect_err("no RDMA device at this address");
    assert_eq!(e.code().kind(), ErrorType::ProviderNotFound, "{e}");
    let cause = if Path::new("/dev/infiniband/rdma_cm").exists() {
        "192.0.2.77 is not an address of this host"
    } else {
        "rdma_cm is unavailable"
    };
    assert!(e.message().contains(cause), "{}", e.message());
}

#[test]
fn unknown_params_are_invalid_parameter_naming_the_key() {
    let e = registry("device = \"rxe0\", prot = 1")
        .open_ia(Some("v"), 8)
        .map(|_| ())
        .expect_err("unknown key");
    assert_eq!(e.code().kind(), ErrorType::InvalidParameter);
    assert!(e.message().contains("params.prot"), "{}", e.message());
    assert!(e.message().contains("embedded"), "{}", e.message());
}

#[test]
fn a_port_the_device_lacks_is_provider_not_found() {
    let Some(dev) = dat_provider_verbs::device_names().into_iter().next() else {
        // No device here: the no-device path is what any open gives.
        let e = registry("device = \"rxe0\", port = 9")
            .open_ia(Some("v"), 8)
            .map(|_| ())
            .expect_err("no device");
        assert_eq!(e.code().kind(), ErrorType::ProviderNotFound, "{e}");
        return;
    };
    let e = registry(&format!("device = \"{dev}\", port = 200"))
        .open_ia(Some("v"), 8)
        .map(|_| ())
        .expect_err("no port 200");
    assert_eq!(e.code().kind(), ErrorType::ProviderNotFound, "{e}");
    assert!(e.message().contains("has no port 200"), "{}", e.message());
}

/// With a device (the rxe VM): a PZ is a PD, a DTO EVD a CQ, and an EP on them is created
/// (its QP waits for a connection). The conformance suite covers what they do.
#[test]
fn on_a_device_pz_dto_evd_and_ep_are_created() {
    if !has_device() {
        return;
    }
    let ia = registry("").open_ia(Some("v"), 8).expect("open");
    let pz = ia.create_pz().expect("a PD");
    let conn = ia
        .create_evd(16, EvdFlags::CONNECTION, None)
        .expect("connection EVD needs no CQ");
    let dto = ia.create_evd(16, EvdFlags::DTO, None).expect("a CQ");
    let ep = ia
        .create_ep(&EpParams {
            pz: Some(&pz),
            recv_evd: Some(&dto),
            request_evd: Some(&dto),
            connect_evd: Some(&conn),
            srq: None,
            attr: None,
        })
        .expect("an EP");
    ep.free().expect("free the EP");
    dto.free().expect("free the DTO EVD");
    conn.free().expect("free the connection EVD");
    pz.free().expect("free the PZ");
}

/// In the rxe VM (`RXE_IP`, `RXE_NETDEV`, `RXE_DEV`, `RXE_GID_INDEX` set by rxe-vm): an IA named
/// by address or by interface resolves through rdma_cm to the device, and reports the address.
#[test]
fn in_the_rxe_vm_address_and_netdev_resolve_to_the_device() {
    let (Ok(ip), Ok(netdev), Ok(dev), Ok(gid)) = (
        std::env::var("RXE_IP"),
        std::env::var("RXE_NETDEV"),
        std::env::var("RXE_DEV"),
        std::env::var("RXE_GID_INDEX"),
    ) else {
        return;
    };
    for params in [
        format!("address = \"{ip}\""),
        format!("netdev = \"{netdev}\", gid_index = {gid}"),
    ] {
        let ia = registry(&params).open_ia(Some("v"), 8).expect(&params);
        let a = ia.attr();
        assert_eq!(a.ia_address.ip().to_string(), ip, "{params}");
        let device = a.transport_attr.iter().find(|n| n.name == "DEVICE");
        assert_eq!(device.map(|n| n.value.as_str()), Some(dev.as_str()));
    }
    // By device and the IPv4-mapped GID: the address comes from the GID.
    let ia = registry(&format!("device = \"{dev}\", port = 1, gid_index = {gid}"))
        .open_ia(Some("v"), 8)
        .expect("by device");
    assert_eq!(ia.attr().ia_address.ip().to_string(), ip);
}
