"""One scrape of a running `hmn serve` for the device scripts (run-all.sh step 4, ops_check.sh):
waits for /healthz (up to 10 s), then writes /metrics to FILE.

    scrape.py PORT FILE
"""
import sys
import time
import urllib.request


def main(port, path):
    base = f"http://127.0.0.1:{port}"
    for _ in range(50):
        try:
            if urllib.request.urlopen(base + "/healthz", timeout=1).status == 200:
                break
        except OSError:
            time.sleep(0.2)
    with open(path, "wb") as f:
        f.write(urllib.request.urlopen(base + "/metrics", timeout=5).read())


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
