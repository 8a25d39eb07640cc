"""A class on JupyterHub: `hub` prepares and serves it on one machine (`./course hub`; deploy/z2jh/
builds the Kubernetes one on it); `hub_files/` holds what it installs (JupyterHub's configuration,
nbgrader's exchange with private submissions, the proxy's npm lock).
"""
