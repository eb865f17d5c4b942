"""Plays the person in interactive-login tests: logs in at the real authorization server's own
login form (Django OAuth Toolkit) with a cookie session, approves or denies, and delivers the
redirect to tokenrelay's loopback listener like a browser would. Prints one JSON object.

  login_agent.py browser URL [--deny] [--wrong-state-first] [--no-deliver]
      URL is the auth-prompt url. Output: {"status", "page", "refused": [statuses of the decoys],
      "location"}; with --no-deliver only {"location"}: the browser is on another machine and cannot
      reach the listener, so the person copies the address bar (tokenrelay login --paste).
  login_agent.py device VERIFICATION_URI USER_CODE [--deny]
      Output: {"approved": true}
  login_agent.py callback REDIRECT_URL
      Only delivers REDIRECT_URL to the listener. Output: {"status", "page"}
User alice / alice-pw (seeded). Uses httpx from the interop virtualenv; no redirect is followed
automatically, so every hop is checked.
"""
import html.parser
import json
import sys
import urllib.parse

import httpx

USER, PASSWORD = "alice", "alice-pw"


class Inputs(html.parser.HTMLParser):
    """Collects the <input> name/value pairs of the first form."""

    def __init__(self):
        super().__init__()
        self.fields = []
        self.forms = 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form":
            self.forms += 1
        if tag == "input" and self.forms == 1 and attrs.get("name") and attrs.get("type") != "submit":
            self.fields.append((attrs["name"], attrs.get("value") or ""))


def inputs(text):
    parser = Inputs()
    parser.feed(text)
    return parser.fields


def login(client, base):
    page = client.get(base + "/accounts/login/")
    page.raise_for_status()
    fields = dict(inputs(page.text))
    answer = client.post(base + "/accounts/login/", data={
        "csrfmiddlewaretoken": fields["csrfmiddlewaretoken"], "username": USER, "password": PASSWORD})
    assert answer.status_code == 302, f"login answered {answer.status_code}"


def origin(url):
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def deliver(url):
    """GETs the loopback redirect like a browser (no cookies, no redirects)."""
    with httpx.Client(timeout=60) as browser:
        answer = browser.get(url)
        return answer.status_code, answer.text


def browser(url, deny=False, wrong_state_first=False, no_deliver=False):
    base = origin(url)
    with httpx.Client(timeout=30, follow_redirects=False) as client:
        login(client, base)
        answer = client.get(url)
        if answer.status_code == 200:  # a consent page: approve or deny it
            fields = inputs(answer.text)
            if not deny:
                fields.append(("allow", "Authorize"))
            answer = client.post(url, content=urllib.parse.urlencode(fields), headers={
                "Referer": url, "Content-Type": "application/x-www-form-urlencoded"})
        assert answer.status_code == 302, f"authorize answered {answer.status_code}: {answer.text[:300]}"
        location = answer.headers["location"]
    assert location.startswith("http://127.0.0.1:"), location
    if no_deliver:
        return {"location": location}
    refused = []
    if wrong_state_first:
        parts = urllib.parse.urlsplit(location)
        query = [(k, v if k != "state" else v + "x") for k, v in urllib.parse.parse_qsl(parts.query)]
        decoy = urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))
        refused.append(deliver(decoy)[0])
        refused.append(deliver(urllib.parse.urlunsplit(parts._replace(path="/elsewhere")))[0])
    status, page = deliver(location)
    return {"status": status, "page": page, "refused": refused, "location": location}


def device(verification_uri, user_code, deny=False):
    base = origin(verification_uri)
    with httpx.Client(timeout=30, follow_redirects=False) as client:
        login(client, base)
        page = client.get(verification_uri)
        fields = dict(inputs(page.text))
        answer = client.post(verification_uri, data={
            "csrfmiddlewaretoken": fields["csrfmiddlewaretoken"], "user_code": user_code})
        assert answer.status_code == 302, f"user code answered {answer.status_code}: {answer.text[:300]}"
        confirm = urllib.parse.urljoin(verification_uri, answer.headers["location"])
        page = client.get(confirm)
        fields = dict(inputs(page.text))
        answer = client.post(confirm, data={
            "csrfmiddlewaretoken": fields["csrfmiddlewaretoken"], "action": "deny" if deny else "accept"})
        assert answer.status_code == 302, f"confirm answered {answer.status_code}"
    return {"approved": not deny}


def main(argv):
    flags = {a for a in argv if a.startswith("--")}
    args = [a for a in argv if not a.startswith("--")]
    if args[0] == "browser":
        result = browser(args[1], deny="--deny" in flags, wrong_state_first="--wrong-state-first" in flags,
                         no_deliver="--no-deliver" in flags)
    elif args[0] == "device":
        result = device(args[1], args[2], deny="--deny" in flags)
    else:
        status, page = deliver(args[1])
        result = {"status": status, "page": page}
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
