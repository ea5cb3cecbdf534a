"""Tests of the certificates package."""
