"""Pages: the chat shell, first-run account creation, login and logout."""
from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model, login
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import UserCreationForm
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods


def _no_user_yet() -> bool:
    return not get_user_model().objects.exists()


def index(request: HttpRequest) -> HttpResponse:
    if _no_user_yet():
        return redirect("setup")
    if not request.user.is_authenticated:
        return redirect(f"{settings.LOGIN_URL}?next=/")
    return _chat(request)


@login_required
def _chat(request: HttpRequest) -> HttpResponse:
    return render(request, "chat.html", {"user": request.user, "import_max_mb": settings.SESSION_IMPORT_MAX_MB})


@login_required
def skills_page(request: HttpRequest) -> HttpResponse:
    """The skills page: list, read, enable per profile, versions and rollback, install and export."""
    return render(request, "skills.html", {"user": request.user})


@login_required
def memory_page(request: HttpRequest) -> HttpResponse:
    """The memory page: the user's facts by category with where each was said, edit, forget, the summary."""
    return render(request, "memory.html", {"user": request.user})


class FirstAccountForm(UserCreationForm):
    email = forms.EmailField(required=False)

    class Meta(UserCreationForm.Meta):
        model = get_user_model()
        fields = ("username", "email")


@require_http_methods(["GET", "POST"])
def setup(request: HttpRequest) -> HttpResponse:
    """First run: when no account exists, create the first one as superuser (no default password)."""
    if not _no_user_yet():
        return redirect("/")
    form = FirstAccountForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        with transaction.atomic():
            if not _no_user_yet():  # somebody else was faster
                return redirect(settings.LOGIN_URL)
            user = form.save(commit=False)
            user.is_staff = True
            user.is_superuser = True
            user.save()
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect("/")
    return render(request, "setup.html", {"form": form})


class LoginView(auth_views.LoginView):
    template_name = "login.html"
    redirect_authenticated_user = True

    def dispatch(self, request: HttpRequest, *args, **kwargs):  # type: ignore[no-untyped-def]
        if _no_user_yet():
            return redirect("setup")
        return super().dispatch(request, *args, **kwargs)


logout_view = auth_views.LogoutView.as_view()


def doctor_page(request: HttpRequest) -> HttpResponse:
    """The admin's Doctor page (staff only, through admin_view): `manage.py doctor` in the browser."""
    from django.contrib import admin

    from navi_site import doctor

    findings = doctor.run_checks()
    context = {**admin.site.each_context(request), "title": "Doctor", "findings": findings,
               "status": doctor.worst(findings)}
    return render(request, "admin/doctor.html", context)
