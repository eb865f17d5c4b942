#!/usr/bin/env python3
"""approve_device.py AS_URL USER_CODE [USERNAME PASSWORD]: approves a device-code login at the
interop stack's Django OAuth Toolkit AS the way a person would in a browser: signs in (default
alice / alice-pw), enters the user code at /o/device/, and accepts. Standard library only.
Exit 0 once accepted. Used by the editor suites' login tests."""
import http.cookiejar
import re
import sys
import urllib.parse
import urllib.request


def main(base, user_code, username="alice", password="alice-pw"):
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))

    def form(path):
        with opener.open(base + path, timeout=30) as page:
            html = page.read().decode()
            m = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
            if not m:
                raise SystemExit(f"no CSRF token on {path}")
            return page.geturl(), m.group(1)

    def post(url, fields):
        data = urllib.parse.urlencode(fields).encode()
        request = urllib.request.Request(url, data=data, headers={"Referer": url})
        with opener.open(request, timeout=30) as answer:
            return answer.geturl(), answer.read().decode()

    url, token = form("/accounts/login/?next=/o/device/")
    url, _ = post(url, {"csrfmiddlewaretoken": token, "username": username, "password": password, "next": "/o/device/"})
    url, token = form("/o/device/")
    url, html = post(url, {"csrfmiddlewaretoken": token, "user_code": user_code})
    if "/device-confirm/" not in url:
        raise SystemExit(f"user code not taken (at {url})")
    m = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
    if not m:
        raise SystemExit("no CSRF token on the confirmation page")
    url, _ = post(url, {"csrfmiddlewaretoken": m.group(1), "action": "accept"})
    if "/device-grant-status/" not in url:
        raise SystemExit(f"not accepted (at {url})")


if __name__ == "__main__":
    main(*sys.argv[1:])
