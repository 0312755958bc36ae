"""Transparent split-TCP proxy: resumable sessions between peer proxies over the mesh."""
