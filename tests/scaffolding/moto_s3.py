"""moto's S3 in server mode on a loopback port, for the tests of everything that talks to S3
(shipping, collecting, the archive, the report's publish): one definition of the stand-in."""

from __future__ import annotations

import socket
from contextlib import contextmanager
from typing import Iterator

# moto takes any credentials: these open nothing
FAKE_AWS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Moto:
    """moto's S3 server; stop() and start() keep its objects (its backends live in this
    process), so it can be 'down for a while'."""

    def __init__(self):
        from moto.server import ThreadedMotoServer

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.up = False
        self.client = None

    def start(self):
        self.server.start()
        self.up = True

    def stop(self):
        self.server.stop()
        self.up = False


@contextmanager
def s3_server(monkeypatch, bucket: str, *, endpoint_env: bool = True) -> Iterator[Moto]:
    """A started server with ``bucket`` made and fake credentials in the environment (and
    AWS_ENDPOINT_URL_S3 naming it unless endpoint_env=False); emptied and stopped after."""
    import boto3

    for k, v in FAKE_AWS.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    m = Moto()
    m.start()
    if endpoint_env:
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", m.url)
    else:
        monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    m.client = boto3.client("s3", endpoint_url=m.url)
    m.client.create_bucket(Bucket=bucket)
    try:
        yield m
    finally:
        if m.up:
            for o in m.client.list_objects_v2(Bucket=bucket).get("Contents", []):  # moto's state is per process
                m.client.delete_object(Bucket=bucket, Key=o["Key"])
            m.client.delete_bucket(Bucket=bucket)
            m.stop()
