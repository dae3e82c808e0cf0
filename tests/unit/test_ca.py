"""The testbed CA (testbed/services/ca.py): stable across runs, name-constrained, leaves with
the right SANs that verify against the CA, and the configs that use them."""

from __future__ import annotations

import ipaddress
import ssl
import subprocess

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from testbed.services import ca as ca_mod
from tests.tools import require

SERVERS = "install/40-testbed-servers.sh"

pytestmark = pytest.mark.unit


def test_ca_is_kept_and_leaves_are_reused(tmp_path):
    a = ca_mod.CA(tmp_path / "ca").ensure()
    fp = a.fingerprint
    leaf = a.issue("isp-resolver.test", ["isp-resolver.test"], ["10.53.1.1"])
    first = leaf.cert.read_bytes()
    b = ca_mod.CA(tmp_path / "ca").ensure()
    assert b.fingerprint == fp
    assert b.issue("isp-resolver.test", ["isp-resolver.test"], ["10.53.1.1"]).cert.read_bytes() == first
    # other SANs: a new leaf
    assert b.issue("isp-resolver.test", ["isp-resolver.test"]).cert.read_bytes() != first
    assert oct(leaf.key.stat().st_mode & 0o777) == "0o600"


def test_leaf_sans_and_constraints(tmp_path):
    a = ca_mod.CA(tmp_path / "ca").ensure()
    leaf = a.issue("public-resolver.test", ["public-resolver.test"], ["10.53.2.1"])
    certs = x509.load_pem_x509_certificates(leaf.cert.read_bytes())
    assert len(certs) == 2 and certs[1].fingerprint(certs[1].signature_hash_algorithm) == a.cert.fingerprint(
        a.cert.signature_hash_algorithm)
    san = certs[0].extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["public-resolver.test"]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("10.53.2.1")]
    assert isinstance(certs[0].public_key(), ec.EllipticCurvePublicKey)
    nc = a.cert.extensions.get_extension_for_class(x509.NameConstraints)
    assert nc.critical and x509.DNSName("test") in nc.value.permitted_subtrees


def test_leaf_verifies_with_openssl_against_the_ca(tmp_path):
    a = ca_mod.CA(tmp_path / "ca").ensure()
    leaf = a.issue("www.single.test", ["www.single.test"])
    ctx = ssl.create_default_context(cafile=str(a.cert_path))
    ctx.load_cert_chain(str(leaf.cert), str(leaf.key))  # the key matches the certificate
    # OpenSSL's verifier is the second implementation (a missing tool is a broken install)
    openssl = require("openssl", SERVERS)
    r = subprocess.run([openssl, "verify", "-CAfile", str(a.cert_path), "-verify_hostname", "www.single.test",
                        str(leaf.cert)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([openssl, "verify", "-CAfile", str(a.cert_path), "-verify_hostname", "www.example.com",
                        str(leaf.cert)], capture_output=True, text=True)
    assert r.returncode != 0


def test_nss_db_for_chromium_and_firefox(tmp_path):
    certutil = require("certutil", SERVERS)
    a = ca_mod.CA(tmp_path / "ca").ensure()
    home = tmp_path / "home"
    db = ca_mod.make_nssdb(home, a.cert_path)
    assert db == home / ".pki" / "nssdb" and (db / "cert9.db").exists()
    ca_mod.make_nssdb(home, a.cert_path)  # idempotent
    out = subprocess.run([certutil, "-d", f"sql:{db}", "-L"], capture_output=True, text=True).stdout
    assert out.count(ca_mod.CA_NICKNAME) == 1 and "C,," in out
    prof = tmp_path / "ff-profile"
    ca_mod.add_to_firefox_profile(prof, a.cert_path)
    assert ca_mod.CA_NICKNAME in subprocess.run([certutil, "-d", f"sql:{prof}", "-L"], capture_output=True,
                                                 text=True).stdout
