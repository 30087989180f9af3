"""Importers: SkyPilot catalogs to offers, vLLM and Melange benchmarks to profiles."""
