"""scripts/check-dockerfile-packages catches what it says it catches.

The real Dockerfiles are checked by the ctest deploy_dockerfiles; this test feeds the
checker small broken Dockerfiles and a good one, so that a check which could never
fail (a parser that finds no packages, a rule that matches nothing) fails here.

Run: .venv/bin/python tests/deploy/dockerfile_check_test.py (ctest: deploy_dockerfile_check).
"""

import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECK = os.path.join(ROOT, "scripts", "check-dockerfile-packages")
IGNORE = ".git\n.venv\nbuild\nbuild-*\n"

GOOD = """\
# syntax=docker/dockerfile:1
ARG DEBIAN_TAG=12.11-slim
FROM debian:${DEBIAN_TAG} AS build
RUN apt-get update \\
 && apt-get install -y --no-install-recommends \\
      cmake \\
      # a comment inside the list
      libgrpc++-dev=1.51.1-3+b1 \\
 && rm -rf /var/lib/apt/lists/*
FROM debian:${DEBIAN_TAG}
RUN apt-get update && apt-get install -y --no-install-recommends tini \\
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /usr/bin/cmake /usr/local/bin/
USER 10001:10001
ENTRYPOINT ["/usr/bin/tini", "--"]
"""


def Check(text, ignore=IGNORE, name="Dockerfile", binaries=()):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write(text)
        if ignore is not None:
            with open(path + ".dockerignore", "w") as f:
                f.write(ignore)
        argv = [sys.executable, CHECK, path] + (["--binaries", *binaries] if binaries else [])
        r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        return r.returncode, r.stdout + r.stderr


class DockerfileCheckTest(unittest.TestCase):
    def assertEachFails(self, cases):
        """Each text of {message: text} fails the check, saying its message."""
        for message, text in cases.items():
            with self.subTest(message=message):
                code, out = Check(text)
                self.assertEqual(code, 1, out)
                self.assertIn(message, out)

    def test_a_good_dockerfile_passes_and_its_packages_are_counted(self):
        code, out = Check(GOOD)
        self.assertEqual(code, 0, out)
        self.assertIn("3 apt packages checked", out)

    def test_an_unknown_package_fails(self):
        code, out = Check(GOOD.replace("tini", "tini libcohort-no-such-package"))
        self.assertEqual(code, 1, out)
        self.assertIn("package libcohort-no-such-package is not in Debian bookworm", out)
        self.assertNotIn("package tini ", out)

    def test_a_package_of_another_release_or_repository_fails(self):
        # kubectl is a package of Google's repository, not of Debian's.
        code, out = Check(GOOD.replace("tini", "kubectl"))
        self.assertEqual(code, 1, out)
        self.assertIn("package kubectl is not in Debian bookworm", out)

    def test_packages_on_a_non_debian_base_cannot_be_checked(self):
        code, out = Check(GOOD.replace("FROM debian:${DEBIAN_TAG}\n", "FROM ubuntu:22.04\n"))
        self.assertEqual(code, 1, out)
        self.assertIn("only Debian bases can be checked", out)

    def test_latest_and_untagged_bases_fail(self):
        for base, message in (("debian:latest", "`latest`"), ("debian", "not pinned")):
            with self.subTest(base=base):
                code, out = Check(GOOD.replace("debian:${DEBIAN_TAG} AS build", base + " AS build"))
                self.assertEqual(code, 1, out)
                self.assertIn(message, out)

    def test_root_in_the_final_stage_fails(self):
        code, out = Check(GOOD.replace("USER 10001:10001\n", ""))
        self.assertIn("sets no USER", out)
        code, out = Check(GOOD.replace("USER 10001:10001", "USER root"))
        self.assertEqual(code, 1, out)
        self.assertIn("runs as root", out)

    def test_apt_hygiene(self):
        cases = {
            "without --no-install-recommends": GOOD.replace("-y --no-install-recommends tini", "-y tini"),
            "without -y": GOOD.replace("install -y --no-install-recommends tini", "install --no-install-recommends tini"),
            "without apt-get update": GOOD.replace("RUN apt-get update && apt-get", "RUN apt-get"),
            "lists not removed": GOOD.replace(" \\\n && rm -rf /var/lib/apt/lists/*\nCOPY", "\nCOPY"),
        }
        self.assertEachFails(cases)

    def test_downloads_secrets_shell_form_and_missing_stages_fail(self):
        cases = {
            "nothing is downloaded": GOOD.replace("USER", "RUN curl -fsSLO https://example.com/x.zip\nUSER"),
            "ADD of a URL": GOOD.replace("USER", "ADD https://example.com/x.zip /x.zip\nUSER"),
            "secrets do not belong": GOOD.replace("USER", "ENV COHORT_AUTH_TOKEN=abc\nUSER"),
            "shell form": GOOD.replace('ENTRYPOINT ["/usr/bin/tini", "--"]', "CMD cohort-server"),
            "no such stage": GOOD.replace("--from=build", "--from=builder"),
        }
        self.assertEachFails(cases)

    def test_a_final_stage_without_a_linked_library_fails(self):
        # sqlite3 (a package scripts/setup installs) links libsqlite3.so.0.
        binary = "/usr/bin/sqlite3"
        code, out = Check(GOOD, binaries=[binary])
        self.assertEqual(code, 1, out)
        self.assertIn("the final stage lacks libsqlite3-0 (libsqlite3.so.0, linked by sqlite3)", out)
        code, out = Check(GOOD.replace("install -y --no-install-recommends tini",
                                       "install -y --no-install-recommends tini libsqlite3-0"),
                          binaries=[binary])
        self.assertNotIn("lacks libsqlite3-0", out)

    def test_a_dockerignore_must_keep_the_junk_out(self):
        code, out = Check(GOOD, ignore=None)
        self.assertIn("no Dockerfile.dockerignore", out)
        code, out = Check(GOOD, ignore=".git\n")
        self.assertEqual(code, 1, out)
        self.assertIn("does not exclude .venv", out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
