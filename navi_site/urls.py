from django.contrib import admin
from django.urls import path

from navi_site import views
from navi_site.api import api
from notify_app.views import service_worker

admin.site.site_header = "Navi administration"
admin.site.site_title = "Navi admin"
admin.site.index_template = "admin/navi_index.html"  # adds the Doctor link

urlpatterns = [
    path("", views.index, name="index"),
    path("setup/", views.setup, name="setup"),
    path("skills/", views.skills_page, name="skills"),
    path("memory/", views.memory_page, name="memory"),
    path("login/", views.LoginView.as_view(), name="login"),
    path("logout/", views.logout_view, name="logout"),
    path("sw.js", service_worker, name="service-worker"),
    path("admin/doctor/", admin.site.admin_view(views.doctor_page), name="admin-doctor"),
    path("admin/", admin.site.urls),
    path("", api.urls),
]
