"""Example pipelines shipped with the package, so that `scheduler example run` can find them."""
