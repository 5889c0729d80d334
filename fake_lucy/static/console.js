// The review console's live updates: the page listens to the event stream (EventSource, which
// resumes with Last-Event-ID by itself) and, when an event it cares about arrives, fetches itself
// again and swaps its <main> for the new one. The new HTML is the server's own autoescaped page,
// parsed by DOMParser (scripts in it never run). No framework, no build step.
(function () {
  "use strict";
  var body = document.body;
  // A destructive action whose form says so (data-confirm) asks first (the page's policy allows no
  // inline script, so the question is asked here, for any such form, swapped in or not).
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var question = form.getAttribute && form.getAttribute("data-confirm");
    if (question) {
      if (!window.confirm(question)) {
        event.preventDefault();
        return;
      }
      confirmed(form); // asked here: the server does not ask again (without JavaScript, it does)
    }
    if (window.fetch && form.method === "post" && !form.hasAttribute("data-plain")) {
      event.preventDefault();
      send(form, event.submitter);
    }
  });

  function confirmed(form) {
    if (!form.querySelector("input[name='confirmed']")) {
      var field = document.createElement("input");
      field.type = "hidden";
      field.name = "confirmed";
      field.value = "yes";
      form.append(field);
    }
  }

  // An action is sent from the page: done, the browser goes where the answer leads (as the form
  // would have); refused, the page stays as it is, with what was typed, and says why beside the
  // form. The refusal is the server's own page, parsed (its scripts never run), its text shown.
  function send(form, submitter) {
    var data = new URLSearchParams(new FormData(form, submitter || undefined));
    var shown = anchorOf(form).nextElementSibling;
    while (shown && shown.classList.contains("refusal")) {
      var next = shown.nextElementSibling;
      shown.remove(); // a new action on the proposal: what was said of the last one goes
      shown = next;
    }
    var index = placeOf(form);
    if (submitter) {
      submitter.disabled = true;
    }
    fetch(form.action, { method: "POST", body: data, credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (response) {
        if (response.ok) {
          keepPlace(index, submitter, response.url);
          window.location.assign(response.url);
          return null;
        }
        return response.text().then(function (html) {
          refuse(form, html, response.status, submitter);
        });
      })
      .catch(function () {
        // never sent again by itself: the fake may have done it before the answer was lost
        note(form, "No answer from the fake: the action may or may not have been done. Reload the page to see.", submitter);
      })
      .finally(function () {
        if (submitter) {
          submitter.disabled = false;
          // disabling it while the action ran took the focus away: a keyboard or screen reader
          // user goes on from the button they pressed, beside what the page now says of it
          var active = document.activeElement;
          if ((!active || active === body) && submitter.isConnected) {
            submitter.focus();
          }
        }
      });
  }

  // The session ended (a logout elsewhere, 12 h unused, its tenant deleted): the login page, unless
  // the reviewer typed something here (a reason), which the page then keeps, saying why nothing
  // more can be done from it, with the way to log in again.
  var over = false;
  function sessionOver() {
    var main = document.getElementById("live");
    if (!main || !typedInto(main)) {
      window.location.assign(body.dataset.login);
      return;
    }
    if (over) {
      return;
    }
    over = true;
    var said = document.createElement("p");
    said.className = "refusal error";
    said.setAttribute("role", "alert");
    said.append("Your session has ended: what you typed is still on this page to copy; ");
    var link = document.createElement("a");
    link.href = body.dataset.login;
    link.textContent = "log in again";
    said.append(link, " to act on it.");
    main.before(said);
    if (status) {
      status.textContent = "session ended";
    }
  }

  // What the reviewer typed or chose and did not send yet: a reason, a count, a menu's choice.
  function typedInto(main) {
    var fields = main.querySelectorAll("input, textarea");
    for (var i = 0; i < fields.length; i++) {
      if (fields[i].type !== "hidden" && fields[i].value !== fields[i].defaultValue) {
        return true;
      }
    }
    // a menu's first option is its choice when none is marked selected in the page
    var menus = main.querySelectorAll("select");
    for (var j = 0; j < menus.length; j++) {
      var initial = 0;
      for (var k = 0; k < menus[j].options.length; k++) {
        if (menus[j].options[k].defaultSelected) {
          initial = k;
          break;
        }
      }
      if (menus[j].selectedIndex !== initial) {
        return true;
      }
    }
    return false;
  }

  function refuse(form, html, status, submitter) {
    var answer = new DOMParser().parseFromString(html, "text/html");
    if (answer.querySelector(".message[data-login]")) {
      sessionOver();
      return;
    }
    var title = answer.querySelector(".message h1");
    var text = answer.querySelector(".message p");
    var said = title && text ? title.textContent + ": " + text.textContent : "Refused (HTTP " + status + ").";
    note(form, said, submitter);
  }

  // After an action the page is loaded again; a keyboard or screen reader user goes on where they
  // were: after one on a card, the focus goes to the card now in the acted one's place (the next in
  // line); after any other, to the page's heading. The status line says what was done.
  var PLACE = "fake-lucy-console-place";
  var PLACE_MS = 10000;
  // The acted card's place in the list when the action was sent (a live update may swap the page
  // while it runs, and the card is then in no list): -1 for an action off the cards.
  function placeOf(form) {
    var cards = Array.prototype.slice.call(document.querySelectorAll("article.proposal"));
    return cards.indexOf(form.closest("article.proposal"));
  }
  function keepPlace(index, submitter, target) {
    var url = new URL(target, window.location.href);
    var named = submitter && (submitter.getAttribute("aria-label") || submitter.textContent.trim());
    try {
      window.sessionStorage.setItem(
        PLACE,
        JSON.stringify({ at: url.pathname + url.search, index: index, done: named || "", when: Date.now() })
      );
    } catch (ignored) {
      // no storage (a private window's policy): the page loads at its top, as without JavaScript
    }
  }
  function restorePlace() {
    var kept = null;
    try {
      kept = JSON.parse(window.sessionStorage.getItem(PLACE) || "null");
      window.sessionStorage.removeItem(PLACE);
    } catch (ignored) {
      return;
    }
    // the load the action led to, not a later visit (the reviewer went elsewhere before it came)
    var fresh = kept && typeof kept.when === "number" && Date.now() - kept.when < PLACE_MS;
    if (!fresh || kept.at !== window.location.pathname + window.location.search) {
      return;
    }
    var cards = document.querySelectorAll("article.proposal");
    var card = kept.index < 0 ? null : cards[Math.min(kept.index, cards.length - 1)];
    place(card ? card.querySelector("button") : null);
    if (kept.done) {
      done = kept.done + ": done · ";
      var line = document.getElementById("live-status");
      if (line) {
        line.textContent = done.slice(0, -3);
      }
    }
  }
  // The element the page itself gave the focus to (a card's first button, or the heading): that is
  // no sign of the reviewer using the page, so live updates go on; once they move the focus, it is.
  var placed = null;
  function place(target) {
    target = target || document.querySelector("main h1");
    if (!target) {
      return;
    }
    if (target.tagName === "H1") {
      target.setAttribute("tabindex", "-1");
    }
    target.focus();
    placed = target;
  }
  // After a live update the placed focus goes to the same card's button in the new page, or to the
  // heading when that card is gone (decided meanwhile): never to another proposal's button, which
  // an Enter meant for the first one would press.
  function placeAgain(main) {
    var card = placed.closest("article.proposal");
    var same = card ? main.querySelector('article.proposal[id="' + card.id + '"]') : null;
    place(same ? same.querySelector("button") : main.querySelector("h1"));
  }
  // once the reviewer moves the focus (a Tab, a click), it is theirs: even back on the placed button
  document.addEventListener("focusin", function (event) {
    if (event.target !== placed) {
      placed = null;
    }
  });
  var done = ""; // what the last action did, said before the live status until the page changes
  restorePlace();

  // A refusal goes below the row of a card's buttons (a proposal's Approve and Reject), never
  // between them, where it would push the reason box and the other button aside.
  function anchorOf(form) {
    return form.closest(".actions") || form;
  }

  function note(form, text, submitter) {
    var shown = document.createElement("p");
    shown.className = "refusal error";
    shown.setAttribute("role", "alert");
    shown.textContent = text;
    shown.dataset.action = form.getAttribute("action") || "";
    var named = submitter && (submitter.getAttribute("aria-label") || submitter.textContent.trim());
    if (named) {
      shown.dataset.about = named;
    }
    anchorOf(form).after(shown);
  }

  // A refusal outlives the live update that swaps the page's <main>: it goes beside the same form in
  // the new one, or, when that form is gone (the proposal it acted on was decided meanwhile), above
  // it, naming the button it answered, until the reviewer leaves the page.
  function keep(notes, main) {
    var forms = main.querySelectorAll("form");
    notes.forEach(function (shown) {
      for (var i = 0; i < forms.length; i++) {
        if (forms[i].getAttribute("action") === shown.dataset.action) {
          anchorOf(forms[i]).after(shown);
          return;
        }
      }
      if (shown.dataset.about) {
        shown.textContent = shown.dataset.about + ": " + shown.textContent;
        delete shown.dataset.about;
      }
      main.before(shown);
    });
  }
  var status = document.getElementById("live-status");
  var types = (body.dataset.live || "").split(" ").filter(Boolean);
  if (!types.length || !window.EventSource) {
    return;
  }
  var busy = false;
  var again = false;

  function say(text) {
    if (status) {
      status.textContent = done + text;
    }
  }

  // The page is never swapped under the reviewer: not while a control in it has the focus or
  // holds what they typed (a reason, a count), nor while the pointer is over it (a button would
  // move away from under the click, and the click land on another proposal's). The update waits
  // and comes when the pointer leaves or the focus moves out.
  function inUse() {
    var main = document.getElementById("live");
    if (!main) {
      return false;
    }
    var active = document.activeElement;
    var focused = active && active !== body && active !== placed && main.contains(active);
    return focused || main.matches(":hover") || typedInto(main);
  }

  function refresh() {
    if (busy || inUse()) {
      again = true;
      if (!busy) {
        say("live · changes wait while you use the page");
      }
      return;
    }
    busy = true;
    fetch(window.location.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (response) {
        if (response.redirected) {
          sessionOver(); // only the login page is a redirect
          return null;
        }
        if (!response.ok) {
          window.location.reload();
          return null;
        }
        return response.text();
      })
      .then(function (html) {
        if (html === null) {
          return;
        }
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("live");
        var main = document.getElementById("live");
        if (fresh && main) {
          var swapped = document.importNode(fresh, true);
          var notes = main.querySelectorAll(".refusal");
          var wasPlaced = placed !== null && document.activeElement === placed;
          main.replaceWith(swapped);
          keep(notes, swapped);
          if (wasPlaced) {
            placeAgain(swapped);
          } else {
            placed = null;
          }
          swapped.addEventListener("mouseleave", retry);
          scheduleExpiry();
        }
        done = "";
        say("live · updated " + new Date().toLocaleTimeString() + " your time");
      })
      .catch(function () {
        say("live · update failed");
      })
      .finally(function () {
        busy = false;
        if (again) {
          again = false;
          window.setTimeout(refresh, 150);
        }
      });
  }

  // A proposal expires by the clock, with no event: the queue asks for itself again once the
  // first one it lists is due (the server names when: #next-expiry, real milliseconds).
  var expiryTimer = null;
  function scheduleExpiry() {
    var next = document.getElementById("next-expiry");
    if (expiryTimer !== null) {
      window.clearTimeout(expiryTimer);
      expiryTimer = null;
    }
    if (next) {
      var wait = Math.min(Number(next.dataset.ms) + 250, 86400000); // setTimeout's range
      expiryTimer = window.setTimeout(refresh, wait);
    }
  }
  scheduleExpiry();

  var source = new EventSource(body.dataset.events + "?after=" + encodeURIComponent(body.dataset.after || "0"));
  types.forEach(function (type) {
    source.addEventListener(type, refresh);
  });
  source.onopen = function () {
    say("live");
  };
  source.onerror = function () {
    if (source.readyState === EventSource.CLOSED) {
      // refused for good (the session ended: logout, 12 h unused, its tenant deleted)
      sessionOver();
      return;
    }
    say("live · reconnecting…");
  };
  function retry() {
    if (again && !busy) {
      again = false;
      refresh();
    }
  }
  document.addEventListener("focusout", function () {
    window.setTimeout(retry, 0); // once the focus has moved on
  });
  var live = document.getElementById("live");
  if (live) {
    live.addEventListener("mouseleave", retry);
  }
})();
