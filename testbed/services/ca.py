"""The testbed CA: one ECDSA P-256 root kept across `up`s in ``<testbed_dir>/ca`` and one
leaf certificate per server name, made with the ``cryptography`` library.

The root is name-constrained to the testbed's own names (``.test``) and addresses
(10.0.0.0/8, 127.0.0.0/8), so trusting it (a client's NSS db, a Firefox profile, a CA file)
can never vouch for a real site. Trust material:

- ``ca_file(dir)``: the PEM file for getdns (``SSL_CERT_FILE``), pycurl (``CAINFO``),
  dnspython / httpx (``verify=``), kdig (``+tls-ca=``);
- ``make_nssdb(home)``: ``$HOME/.pki/nssdb`` for Chromium run with that HOME;
- ``add_to_firefox_profile(profile_dir)``: the CA in a Firefox profile's NSS db.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_NICKNAME = "dnscamp-testbed-ca"
CA_DAYS = 3650
LEAF_DAYS = 365  # well under the 398-day limit browsers enforce for public CAs
PERMITTED_DNS = ["test"]
PERMITTED_NETS = ["10.0.0.0/8", "127.0.0.0/8"]


class CAError(RuntimeError):
    """The CA or a trust store could not be made; the message says which file or tool."""


@dataclass(frozen=True)
class Leaf:
    name: str
    cert: Path  # PEM: leaf certificate followed by the CA certificate (full chain)
    key: Path  # PEM, PKCS#8, unencrypted


def _write_private(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


class CA:
    """A CA directory: ``ca.crt``, ``ca.key`` and ``certs/<name>.{crt,key}``."""

    def __init__(self, directory: Path):
        self.dir = Path(directory)
        self.cert_path = self.dir / "ca.crt"
        self.key_path = self.dir / "ca.key"
        self._cert: x509.Certificate | None = None
        self._key: ec.EllipticCurvePrivateKey | None = None

    # -- the root ------------------------------------------------------------------------------
    def ensure(self) -> "CA":
        """Load the CA, creating it on first use (or if its files are unreadable/expiring)."""
        if self.cert_path.exists() and self.key_path.exists():
            try:
                cert = x509.load_pem_x509_certificate(self.cert_path.read_bytes())
                key = serialization.load_pem_private_key(self.key_path.read_bytes(), password=None)
                if cert.not_valid_after_utc > _now() + dt.timedelta(days=30):
                    self._cert, self._key = cert, key
                    return self
            except (ValueError, OSError):
                pass
        self._create()
        return self

    def _create(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "dnscamp testbed"),
            x509.NameAttribute(NameOID.COMMON_NAME, "dnscamp testbed CA"),
        ])
        now = _now()
        ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
        cert = (
            x509.CertificateBuilder()
            .subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, key_cert_sign=True, crl_sign=True,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(ski, critical=False)
            .add_extension(x509.NameConstraints(
                permitted_subtrees=[x509.DNSName(d) for d in PERMITTED_DNS]
                + [x509.IPAddress(ipaddress.ip_network(n)) for n in PERMITTED_NETS],
                excluded_subtrees=None), critical=True)
            .sign(key, hashes.SHA256())
        )
        _write_private(self.key_path, _key_pem(key))
        _write(self.cert_path, cert.public_bytes(serialization.Encoding.PEM))
        shutil.rmtree(self.dir / "certs", ignore_errors=True)  # leaves of an old root are useless
        self._cert, self._key = cert, key

    @property
    def cert(self) -> x509.Certificate:
        if self._cert is None:
            self.ensure()
        return self._cert

    @property
    def fingerprint(self) -> str:
        return self.cert.fingerprint(hashes.SHA256()).hex()

    # -- leaves --------------------------------------------------------------------------------
    def issue(self, name: str, dns_names: list[str], ips: list[str] | None = None) -> Leaf:
        """A leaf for ``dns_names`` (+ IP SANs ``ips``), reused if one with the same SANs from
        this CA is on disk and valid for 30 more days."""
        self.ensure()
        ips = list(ips or [])
        certs = self.dir / "certs"
        certs.mkdir(parents=True, exist_ok=True)
        crt, key_path = certs / f"{name}.crt", certs / f"{name}.key"
        tag = hashlib.sha256(("|".join(dns_names) + "#" + "|".join(ips) + "#" + self.fingerprint).encode()).hexdigest()
        stamp = certs / f"{name}.sans"
        if crt.exists() and key_path.exists() and stamp.exists() and stamp.read_text() == tag:
            try:
                leaf = x509.load_pem_x509_certificate(crt.read_bytes())
                if leaf.not_valid_after_utc > _now() + dt.timedelta(days=30):
                    return Leaf(name, crt, key_path)
            except ValueError:
                pass
        key = ec.generate_private_key(ec.SECP256R1())
        now = _now()
        sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
        sans += [x509.IPAddress(ipaddress.ip_address(a)) for a in ips]
        assert self._key is not None and self._cert is not None
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_names[0] if dns_names else ips[0])]))
            .issuer_name(self._cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + dt.timedelta(days=LEAF_DAYS))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, key_cert_sign=False, crl_sign=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        _write_private(key_path, _key_pem(key))
        _write(crt, cert.public_bytes(serialization.Encoding.PEM) + self._cert.public_bytes(serialization.Encoding.PEM))
        _write(stamp, tag.encode())
        return Leaf(name, crt, key_path)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def ca_dir() -> Path:
    from vantage_agent.paths import testbed_dir

    return testbed_dir() / "ca"


def ca_file(directory: Path | None = None) -> Path:
    """The CA's PEM file (created if missing)."""
    return CA(directory or ca_dir()).ensure().cert_path


# -- NSS trust stores (Chromium, Firefox) ------------------------------------------------------

def _certutil(*args: str) -> subprocess.CompletedProcess:
    exe = shutil.which("certutil")
    if exe is None:
        raise CAError("certutil not found: install libnss3-tools (install/40-testbed-servers.sh)")
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=30)


def add_to_nssdb(db_dir: Path, ca_pem: Path | None = None, nickname: str = CA_NICKNAME) -> Path:
    """Trust the testbed CA (for TLS servers: ``C,,``) in the NSS db at ``db_dir`` (sql:
    format), creating the db with an empty password if needed. Idempotent."""
    db_dir = Path(db_dir)
    ca_pem = Path(ca_pem or ca_file())
    db_dir.mkdir(parents=True, exist_ok=True)
    if not (db_dir / "cert9.db").exists():
        r = _certutil("-d", f"sql:{db_dir}", "-N", "--empty-password")
        if r.returncode != 0:
            raise CAError(f"certutil -N {db_dir}: {r.stderr.strip() or r.stdout.strip()}")
    _certutil("-d", f"sql:{db_dir}", "-D", "-n", nickname)  # drop a CA of an older root, if any
    r = _certutil("-d", f"sql:{db_dir}", "-A", "-t", "C,,", "-n", nickname, "-i", str(ca_pem))
    if r.returncode != 0:
        raise CAError(f"certutil -A {db_dir}: {r.stderr.strip() or r.stdout.strip()}")
    return db_dir


def make_nssdb(home: Path, ca_pem: Path | None = None) -> Path:
    """``<home>/.pki/nssdb`` trusting the testbed CA: run Chromium with HOME=<home>."""
    return add_to_nssdb(Path(home) / ".pki" / "nssdb", ca_pem)


def add_to_firefox_profile(profile_dir: Path, ca_pem: Path | None = None) -> Path:
    """Trust the testbed CA in a Firefox profile directory (its cert9.db)."""
    return add_to_nssdb(Path(profile_dir), ca_pem)
