"""The bootstrap's status PUT, before the agent exists (python3's standard library only):
status/<campaign>/<vantage>/<region>/<instance-id>.json in the agent's schema, SigV4-signed
with the instance role's IMDSv2 credentials (or AWS_* and AWS_ENDPOINT_URL_S3 from the
environment, as boto3 reads them). The user data embeds this file byte for byte, so it is
short: EC2 takes 16 KiB of user data. No credential is ever printed."""
import argparse, base64, datetime, hashlib, hmac, json, os, re, shutil, socket, sys, time
import urllib.error, urllib.parse, urllib.request as ur

IMDS = "http://169.254.169.254/latest/"


def imds(path, token=None):
    h = {"X-aws-ec2-metadata-token": token} if token else {"X-aws-ec2-metadata-token-ttl-seconds": "300"}
    req = ur.Request(IMDS + (path if token else "api/token"), headers=h, method="GET" if token else "PUT")
    with ur.urlopen(req, timeout=1) as r:
        return r.read().decode().strip()


def credentials():
    env = os.environ.get
    iid, c = env("DNSCAMP_INSTANCE_ID"), {"key": env("AWS_ACCESS_KEY_ID"), "secret": env("AWS_SECRET_ACCESS_KEY"),
                                          "token": env("AWS_SESSION_TOKEN")}
    if iid and c["key"] and c["secret"]:
        return iid, c
    try:
        token = imds("")
    except OSError:
        token = None
    if not iid:
        try:
            iid = imds("meta-data/instance-id", token) if token else None
        except OSError:
            iid = None
    if not (c["key"] and c["secret"]):
        if not token:
            raise RuntimeError("no credentials: none in the environment and IMDSv2 does not answer")
        role = imds("meta-data/iam/security-credentials/", token).split()[0]
        d = json.loads(imds("meta-data/iam/security-credentials/" + role, token))
        c = {"key": d["AccessKeyId"], "secret": d["SecretAccessKey"], "token": d.get("Token")}
    return iid or socket.gethostname(), c


def sign(url, region, body, c, now):
    u, t = urllib.parse.urlsplit(url), now.strftime("%Y%m%dT%H%M%SZ")
    h = {"content-md5": base64.b64encode(hashlib.md5(body).digest()).decode(), "content-type": "application/json",
         "host": u.netloc, "x-amz-content-sha256": hashlib.sha256(body).hexdigest(), "x-amz-date": t}
    if c.get("token"):
        h["x-amz-security-token"] = c["token"]
    names = sorted(h)
    canon = "\n".join(["PUT", urllib.parse.quote(u.path, safe="/-_.~"), "", "".join(f"{k}:{h[k].strip()}\n" for k in names),
                       ";".join(names), h["x-amz-content-sha256"]])
    scope = f"{t[:8]}/{region}/s3/aws4_request"
    k = ("AWS4" + c["secret"]).encode()
    for part in (t[:8], region, "s3", "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    sig = hmac.new(k, f"AWS4-HMAC-SHA256\n{t}\n{scope}\n{hashlib.sha256(canon.encode()).hexdigest()}".encode(),
                   hashlib.sha256).hexdigest()
    h["authorization"] = f"AWS4-HMAC-SHA256 Credential={c['key']}/{scope}, SignedHeaders={';'.join(names)}, Signature={sig}"
    return ur.Request(url, data=body, method="PUT", headers=h)


def put(bucket, key, region, body, c):
    # retried a few times; a bucket of another region (S3's 301 or 400 names it) is signed for it
    end, err = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"), "no attempt"
    for attempt in range(4):
        path = urllib.parse.quote(key, safe="/-_.~")
        url = f"{end.rstrip('/')}/{bucket}/{path}" if end else f"https://{bucket}.s3.{region}.amazonaws.com/{path}"
        try:
            with ur.urlopen(sign(url, region, body, c, datetime.datetime.now(datetime.timezone.utc)), timeout=10) as r:
                return r.read()
        except urllib.error.HTTPError as e:
            text = e.read(4096).decode("utf-8", "replace")
            other = e.headers.get("x-amz-bucket-region") or "".join(re.findall(r"<Region>([a-z0-9-]{1,32})</Region>", text)[:1])
            if other and other != region:
                region = other
                continue
            err = f"HTTP {e.code} {''.join(re.findall(r'<Code>([A-Za-z]{1,64})</Code>', text)[:1]) or e.reason}"
            if e.code < 500 and e.code != 429:
                break
        except OSError as e:
            err = f"{type(e).__name__}: {str(e)[:120]}"
        time.sleep(2**attempt)
    raise RuntimeError(f"PUT s3://{bucket}/{key}: {err}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--phase", choices=("bootstrap", "bootstrap_error"), required=True)
    ap.add_argument("--step", default="", help="the failing step")
    ap.add_argument("--log", help="the bootstrap log: its last 20 lines go into the status")
    ap.add_argument("--env-file", default="/etc/dnscamp/vantage.env")
    a = ap.parse_args(argv)
    v = {}
    try:
        v = dict(ln.strip().split("=", 1) for ln in open(a.env_file) if "=" in ln and not ln.startswith("#"))
    except OSError:
        pass
    v = {k: os.environ.get(k) or v.get(k, "") for k in ("DNSCAMP_CAMPAIGN", "DNSCAMP_VANTAGE", "DNSCAMP_REGION",
                                                      "DNSCAMP_RESULTS_BUCKET", "DNSCAMP_AGENT_VERSION")}
    if not all(v[k] for k in ("DNSCAMP_CAMPAIGN", "DNSCAMP_VANTAGE", "DNSCAMP_RESULTS_BUCKET")):
        sys.exit(f"put_status: {a.env_file}: DNSCAMP_CAMPAIGN, DNSCAMP_VANTAGE or DNSCAMP_RESULTS_BUCKET missing")
    tail = []
    try:
        tail = [ln.rstrip("\n")[:500] for ln in open(a.log, errors="replace").readlines()[-20:]] if a.log else []
    except OSError:
        pass
    region = v["DNSCAMP_REGION"] or "local"
    try:
        iid, c = credentials()
        key = f"status/{v['DNSCAMP_CAMPAIGN']}/{v['DNSCAMP_VANTAGE']}/{region}/{iid}.json"
        body = {"schema": 1, "campaign": v["DNSCAMP_CAMPAIGN"], "vantage": v["DNSCAMP_VANTAGE"], "region": region,
                "instance_id": iid, "at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "agent_version": v["DNSCAMP_AGENT_VERSION"] or None, "phase": a.phase, "launched_at": None,
                "last_firing": None, "firings": 0, "skipped_firings": 0, "last_skipped_at": None, "pending_units": 0,
                "runs_incomplete": 0, "disk_free_bytes": shutil.disk_usage("/").free, "clock_offset_s": None,
                "error": {"step": a.step, "log_tail": tail} if a.phase == "bootstrap_error" else None,
                "ship": {"shipped": 0, "pending": 0, "errors": []}}
        put(v["DNSCAMP_RESULTS_BUCKET"], key, region if region != "local" else "us-east-1",
            json.dumps(body, indent=1).encode() + b"\n", c)
    except (RuntimeError, OSError, ValueError, KeyError, IndexError) as e:
        sys.exit(f"put_status: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
    print(key)


if __name__ == "__main__":
    main()
