"""A real browser as the person: headless Chromium (Debian's chromium + chromium-driver) driven by
Selenium opens the auth-prompt URL, logs in at the authorization server's own login page as
alice, approves or denies, is redirected to tokenrelay's loopback callback, and reports the page
tokenrelay answered with (and saves a screenshot of it).

  browser_login.py URL SCREENSHOT.png [--deny]
Prints {"url", "title", "text", "source"} as JSON.

Chromium keeps everything in a temporary directory removed at the end: its profile
(--user-data-dir) and what it writes under the XDG directories whatever the profile (the
crash reporter's database), so a test run leaves nothing in the user's home.
"""
import json
import os
import sys
import tempfile

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait


def main(url, screenshot, deny):
    with tempfile.TemporaryDirectory(prefix="tokenrelay-browser-", ignore_cleanup_errors=True) as home:
        run(url, screenshot, deny, home)


def run(url, screenshot, deny, home):
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--no-first-run", "--disable-extensions", "--disable-breakpad", "--window-size=900,700",
                 f"--user-data-dir={os.path.join(home, 'profile')}"):
        options.add_argument(flag)
    env = dict(os.environ, HOME=home, **{f"XDG_{kind}_HOME": os.path.join(home, kind.lower())
                                         for kind in ("CONFIG", "CACHE", "DATA", "STATE")})
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver", env=env), options=options)
    try:
        driver.set_page_load_timeout(60)
        wait = WebDriverWait(driver, 60)
        driver.get(url)
        # Django's login form (LoginView), reached through the authorize redirect.
        wait.until(expected_conditions.presence_of_element_located((By.NAME, "username")))
        driver.find_element(By.NAME, "username").send_keys("alice")
        driver.find_element(By.NAME, "password").send_keys("alice-pw")
        driver.find_element(By.CSS_SELECTOR, "button[type=submit], input[type=submit]").click()
        if deny:
            # Django OAuth Toolkit's consent page: Cancel denies (error=access_denied).
            wait.until(expected_conditions.presence_of_element_located((By.ID, "authorizationForm")))
            driver.find_element(By.CSS_SELECTOR, "input[type=submit]:not([name=allow])").click()
        wait.until(lambda d: d.current_url.startswith("http://127.0.0.1:") and "/o/" not in d.current_url
                   and d.find_elements(By.TAG_NAME, "h1"))
        driver.save_screenshot(screenshot)
        print(json.dumps({"url": driver.current_url, "title": driver.title,
                          "text": driver.find_element(By.TAG_NAME, "body").text, "source": driver.page_source}))
    finally:
        driver.quit()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], "--deny" in sys.argv[3:])
