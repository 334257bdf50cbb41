"""What made bwrap fail to create its namespaces, judged from its own words and the
kernel's settings: this machine's real values, and the ones of the systems that restrict
user namespaces (Ubuntu 24.04+'s AppArmor, Debian's sysctl, a limit of 0), constructed.
The sidecar really failing that way is in tests/test_unprivileged_e2e.py."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from sidecar.agent import sandbox, sandbox_diagnosis
from sidecar.agent.sandbox_diagnosis import HostFacts, diagnose, read_facts

# bwrap 0.8.0's own messages, by cause (the first seen here for real: tests/unprivileged.py).
ENOSPC = (
    "bwrap: Creating new namespace failed: nesting depth or "
    "/proc/sys/user/max_*_namespaces exceeded (ENOSPC)"
)
EPERM = (
    "bwrap: No permissions to creating new namespace, likely because the kernel does not "
    "allow non-privileged user namespaces. On e.g. debian this can be enabled with "
    "'sysctl kernel.unprivileged_userns_clone=1'."
)
UID_MAP = "bwrap: setting up uid map: Permission denied"
LOOPBACK = "bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted"
MOUNT = "bwrap: Can't mount proc on /newroot/proc: Operation not permitted"

UNRESTRICTED = HostFacts(
    root=False,
    apparmor_restrict_unprivileged_userns=None,
    unprivileged_userns_clone=None,
    max_user_namespaces=15000,
)
UBUNTU_2404 = HostFacts(False, 1, None, 15000)
DEBIAN = HostFacts(False, None, 0, 15000)
SWITCHED_OFF = HostFacts(False, None, None, 0)


def _sysctl(path: str) -> int | None:
    file = Path(path)
    return int(file.read_text().split()[0]) if file.exists() else None


def test_the_facts_are_this_machines_own_values() -> None:
    facts = read_facts()
    assert facts == HostFacts(
        root=os.geteuid() == 0,
        apparmor_restrict_unprivileged_userns=_sysctl(
            "/proc/sys/kernel/apparmor_restrict_unprivileged_userns"
        ),
        unprivileged_userns_clone=_sysctl("/proc/sys/kernel/unprivileged_userns_clone"),
        max_user_namespaces=_sysctl("/proc/sys/user/max_user_namespaces"),
    )
    assert facts.max_user_namespaces is not None  # every Linux since 4.9 has it


def test_this_machines_values_with_a_limit_reached_name_the_limit() -> None:
    facts = read_facts()
    if facts.root:  # the user namespace rules are for normal users: judge as one
        facts = dataclasses.replace(facts, root=False)
    said = diagnose(ENOSPC, facts)
    assert said is not None
    if facts.max_user_namespaces == 0:
        assert "user.max_user_namespaces = 0" in said
    else:
        assert f"user.max_user_namespaces (here {facts.max_user_namespaces})" in said
        assert "enclosing namespace" in said


def test_ubuntu_apparmor_restriction_is_named_with_the_profile_fix() -> None:
    for stderr in (UID_MAP, LOOPBACK):
        said = diagnose(stderr, UBUNTU_2404)
        assert said is not None
        assert "kernel.apparmor_restrict_unprivileged_userns = 1" in said
        assert "/etc/apparmor.d/bwrap" in said and "userns," in said
        assert "apparmor_parser -r /etc/apparmor.d/bwrap" in said
        assert "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0" in said
        assert "unprivileged_userns_clone" not in said and "max_user_namespaces" not in said


def test_debian_sysctl_is_named_with_its_value() -> None:
    said = diagnose(EPERM, DEBIAN)
    assert said is not None
    assert "kernel.unprivileged_userns_clone = 0" in said
    assert "sysctl -w kernel.unprivileged_userns_clone=1" in said
    assert "AppArmor" not in said


def test_a_limit_of_zero_is_named() -> None:
    said = diagnose(ENOSPC, SWITCHED_OFF)
    assert said is not None
    assert "user.max_user_namespaces = 0" in said
    assert "sysctl -w user.max_user_namespaces=15000" in said


def test_every_setting_that_forbids_it_is_named() -> None:
    said = diagnose(UID_MAP, HostFacts(False, 1, 0, 0))
    assert said is not None
    for name in (
        "user.max_user_namespaces = 0",
        "kernel.unprivileged_userns_clone = 0",
        "kernel.apparmor_restrict_unprivileged_userns = 1",
    ):
        assert name in said


def test_no_setting_to_blame_means_the_container_or_runtime() -> None:
    said = diagnose(EPERM, UNRESTRICTED)
    assert said is not None and "container" in said
    assert "sysctl" not in said


def test_as_root_no_user_namespace_setting_is_blamed() -> None:
    # bwrap run by root makes no user namespace: the sysctls cannot be why.
    said = diagnose(ENOSPC, HostFacts(True, 1, 0, 0))
    assert said is not None and "container" in said and "sysctl" not in said
    assert diagnose(LOOPBACK, HostFacts(True, 1, None, 15000)) is None


@pytest.mark.parametrize("stderr", [MOUNT, LOOPBACK, "bwrap: execvp true: No such file"])
def test_other_failures_are_not_namespace_failures(stderr: str) -> None:
    assert diagnose(stderr, UNRESTRICTED) is None
    assert diagnose(stderr, DEBIAN) is None


def test_the_self_tests_reason_quotes_bwrap_and_names_the_cause() -> None:
    reason = sandbox._failure_reason("/usr/bin/bwrap", 1, UID_MAP + "\n", UBUNTU_2404)
    assert reason.startswith(f"bwrap at /usr/bin/bwrap failed its self-test (exit 1): {UID_MAP};")
    assert "kernel.apparmor_restrict_unprivileged_userns = 1" in reason
    network = sandbox._failure_reason("/usr/bin/bwrap", 1, LOOPBACK, UNRESTRICTED)
    assert "allow network namespaces" in network
    mount = sandbox._failure_reason("/usr/bin/bwrap", 1, MOUNT, UBUNTU_2404)
    assert "AppArmor" in mount  # AppArmor takes the capabilities mounting needs


def test_the_profile_gist_is_one_apparmor_profile_for_bwrap() -> None:
    gist = sandbox_diagnosis.APPARMOR_PROFILE
    assert gist.startswith("abi <abi/4.0>")
    assert "profile bwrap /usr/bin/bwrap flags=(unconfined) { userns, }" in gist
