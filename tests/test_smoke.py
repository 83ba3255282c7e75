def test_settings_load(settings):
    assert settings.NAVI_MODE in {"embedded", "scale-out"}
