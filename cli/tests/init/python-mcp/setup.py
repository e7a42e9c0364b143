from setuptools import setup
setup(name="tools-server", install_requires=["mcp>=1.2"])
