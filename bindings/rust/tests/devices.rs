//! devices.rs - the device list and choosing a device through the binding.
//!
//! list_devices() is sinter_device_count/sinter_device_get: the Vulkan devices, then the host
//! CPU, which is always there. BackendOptions::device chooses one by index or name; a name that
//! matches nothing is NotFound with the devices listed.
use sinter::{
    list_devices, Backend, BackendKind, BackendOptions, ComputeBackend, DeviceType, StatusCode,
};

#[test]
fn the_list_ends_with_the_host_cpu() {
    let devices = list_devices().expect("list_devices");
    for d in &devices {
        eprintln!(
            "device {}: {} {:?} {:?}",
            d.index, d.name, d.kind, d.device_type
        );
    }
    let cpu = devices.last().expect("at least the CPU");
    assert_eq!(cpu.kind, BackendKind::Cpu);
    assert_eq!(cpu.device_type, DeviceType::Cpu);
    assert!(cpu.compute_units >= 1, "{cpu:?}");
    assert!(cpu.memory_bytes > 0, "{cpu:?}");
    assert!(!cpu.name.is_empty());
    for (i, d) in devices.iter().enumerate() {
        assert_eq!(
            d.kind == BackendKind::Vulkan,
            i + 1 < devices.len(),
            "Vulkan devices first, then the CPU: {devices:?}"
        );
        assert!(
            devices[..i].iter().all(|e| e.index < d.index),
            "indices rise: {devices:?}"
        );
    }
}

#[test]
fn the_default_kind_is_auto() {
    assert_eq!(BackendOptions::default().kind, "auto");
    assert_eq!(BackendOptions::default().device, "");
}

#[test]
fn a_device_is_chosen_by_index_or_name() {
    let devices = list_devices().expect("list_devices");
    let cpu = devices.last().unwrap();
    for device in [cpu.index.to_string(), "cpu".to_string(), cpu.name.clone()] {
        let backend = Backend::with_options(&BackendOptions {
            kind: "reference".to_string(),
            device: device.clone(),
            ..BackendOptions::default()
        })
        .unwrap_or_else(|e| panic!("reference on device {device}: {e}"));
        assert_eq!(backend.name(), "reference", "device {device}");
    }
    // auto on the CPU is the cpu kind, where this build has it.
    match Backend::with_options(&BackendOptions {
        device: "cpu".to_string(),
        ..BackendOptions::default()
    }) {
        Ok(b) => assert_eq!(b.name(), "sinter-cpu"),
        Err(e) => assert_eq!(e.code(), StatusCode::Unimplemented, "{e}"),
    }
    // A Vulkan device is no place for the reference.
    if let Some(gpu) = devices.iter().find(|d| d.kind == BackendKind::Vulkan) {
        let err = Backend::with_options(&BackendOptions {
            kind: "reference".to_string(),
            device: gpu.index.to_string(),
            ..BackendOptions::default()
        })
        .err()
        .expect("reference on a Vulkan device");
        assert_eq!(err.code(), StatusCode::InvalidArgument, "{err}");
    }
}

#[test]
fn an_unknown_device_is_not_found_listing_the_devices() {
    let cpu = list_devices().unwrap().pop().unwrap();
    let err = Backend::with_options(&BackendOptions {
        kind: "reference".to_string(),
        device: "no-such-device-anywhere".to_string(),
        ..BackendOptions::default()
    })
    .err()
    .expect("an unknown device fails");
    assert_eq!(err.code(), StatusCode::NotFound, "{err}");
    assert!(err.message().contains("no-such-device-anywhere"), "{err}");
    assert!(err.message().contains(&cpu.name), "{err}");
}
