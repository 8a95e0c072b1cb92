"""The Graph tab's controls: its toolbar, in rows that wrap when the tab is narrow, and the
row of the breadcrumb and the search field.

A QToolBar hides what does not fit behind "››" and squeezes its widgets (a depth choice read
"Modules closec" beside the form on a 1024-pixel screen); here every control keeps its size
and a row too long for the width continues on the next one (`FlowLayout`, Qt's flow layout
example). Rarely used commands are grouped in menus (`add_menu`: Layout, Export).
"""

from __future__ import annotations

import importlib.util

from PySide6.QtCore import QMargins, QPoint, QRect, QSize, Qt, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLayout,
    QLayoutItem,
    QLineEdit,
    QMenu,
    QSizePolicy,
    QToolButton,
    QWidget,
)


class FlowLayout(QLayout):
    """Items left to right, in rows that wrap at the layout's width (height for width)."""

    def __init__(self, parent: QWidget | None = None, spacing: int = 2) -> None:
        super().__init__(parent)
        self._items: list[QLayoutItem] = []
        self.setSpacing(spacing)
        self.setContentsMargins(QMargins(4, 2, 4, 2))

    def addItem(self, item: QLayoutItem) -> None:
        self._items.append(item)

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, index: int) -> QLayoutItem | None:
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int) -> QLayoutItem | None:
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    def expandingDirections(self) -> Qt.Orientation:
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        return self._arrange(QRect(0, 0, width, 0), move=False)

    def setGeometry(self, rect: QRect) -> None:
        super().setGeometry(rect)
        self._arrange(rect, move=True)

    def sizeHint(self) -> QSize:
        """One row of everything (what the layout asks for when there is room)."""
        m = self.contentsMargins()
        shown = [i.sizeHint() for i in self._items if not i.isEmpty()]
        width = sum(s.width() for s in shown) + self.spacing() * max(len(shown) - 1, 0)
        height = max((s.height() for s in shown), default=0)
        return QSize(width + m.left() + m.right(), height + m.top() + m.bottom())

    def minimumSize(self) -> QSize:
        """The widest item: narrower, the rows would cut it."""
        m = self.contentsMargins()
        size = QSize()
        for item in self._items:
            size = size.expandedTo(item.minimumSize())
        return size + QSize(m.left() + m.right(), m.top() + m.bottom())

    def _arrange(self, rect: QRect, move: bool) -> int:
        """Place the items in rows within `rect` (only measure unless `move`); the height
        the rows take."""
        m = self.contentsMargins()
        area = rect.adjusted(m.left(), m.top(), -m.right(), -m.bottom())
        x, y, row_height = area.x(), area.y(), 0
        gap = self.spacing()
        for item in self._items:
            if item.isEmpty():  # a hidden widget takes no room
                continue
            size = item.sizeHint()
            if x > area.x() and x + size.width() > area.right() + 1:
                x, y, row_height = area.x(), y + row_height + gap, 0
            if move:
                item.setGeometry(QRect(QPoint(x, y), size))
            x += size.width() + gap
            row_height = max(row_height, size.height())
        return y + row_height - rect.y() + m.bottom()


class WrappingToolbar(QWidget):
    """Tool buttons (for actions), widgets and menu buttons in wrapping rows."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.flow = FlowLayout(self)
        policy = QSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)
        self.buttons: dict[str, QToolButton] = {}  # by their text, for tests and look-ups

    def add_action(self, action: QAction) -> QToolButton:
        """A button for `action` (it follows the action's text, state and visibility)."""
        button = QToolButton(self)
        button.setDefaultAction(action)
        button.setAutoRaise(True)
        self.flow.addWidget(button)
        self.buttons[action.text()] = button
        return button

    def add_widget(self, widget: QWidget) -> None:
        """A widget of its own (a choice box) in the row."""
        widget.setParent(self)
        self.flow.addWidget(widget)

    def add_menu(self, text: str, actions: list[QAction], tip: str) -> QToolButton:
        """A button that opens a menu of `actions` (checkable ones show their state)."""
        menu = QMenu(self)
        menu.setToolTipsVisible(True)
        for action in actions:
            menu.addAction(action)
        button = QToolButton(self)
        button.setText(text)
        button.setToolTip(tip)
        button.setMenu(menu)
        button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        button.setAutoRaise(True)
        self.flow.addWidget(button)
        self.buttons[text] = button
        return button


class GraphToolbar(WrappingToolbar):
    """Fit, zoom in and out, Expand all, the depth choice, Layout ▸ (left to right, fold
    shapes), Export ▸ (PNG, SVG, Netron) and Properties (the panel shown or hidden): actions
    the browser connects. `shortcut_actions`
    are the ones with a key, for the browser to add to itself (a key works wherever the
    focus is inside the browser)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.shortcut_actions: list[QAction] = []
        self.fit_action = self._action("Fit", "Show the whole graph", "0")
        self.zoom_in_action = self._action("+", "Zoom in", "Ctrl++")
        self.zoom_out_action = self._action("−", "Zoom out", "Ctrl+-")
        self.expand_action = self._action("Expand all", "Open every module box")
        for action in (self.fit_action, self.zoom_in_action, self.zoom_out_action,
                       self.expand_action):
            self.add_action(action)
        self.depth_combo = QComboBox(self)
        self.depth_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.depth_combo.setToolTip(
            "How deep module boxes are opened. Level 1 opens the top-level modules (each "
            "transformer block, say) to show what is inside them, level 2 the modules inside "
            "those, and so on; deeper modules stay closed boxes. Double-click a box to open or "
            "close one module.")
        self.add_widget(self.depth_combo)
        self.direction_action = self._action(
            "Left to right", "Lay the graph out left to right instead of top to bottom (suits "
            "wide screens and long chains)", checkable=True)
        self.fold_action = self._action(
            "Fold shapes", "Fold constants and shape arithmetic into the node they feed",
            checkable=True)
        self.fold_action.setChecked(True)
        self.add_menu("Layout", [self.direction_action, self.fold_action],
                      "How the graph is laid out: its direction, and whether shape arithmetic "
                      "is folded into the node it feeds")
        self.png_action = self._action("Save as PNG…", "Save the whole graph as a PNG image")
        self.svg_action = self._action("Save as SVG…", "Save the whole graph as an SVG drawing")
        self.netron_action = self._action("Open in Netron", "Open the file in Netron (the "
                                          "netron package is installed)")
        self.netron_action.setVisible(importlib.util.find_spec("netron") is not None)
        self.add_menu("Export", [self.png_action, self.svg_action, self.netron_action],
                      "Save the graph as a picture, or open the file in Netron")
        self.properties_action = self._action(
            "Properties", "Show the properties panel beside the graph (hide it: the graph "
            "takes the whole width)", checkable=True)
        self.properties_action.setChecked(True)
        self.add_action(self.properties_action)

    def _action(self, text: str, tip: str, shortcut: str | None = None,
                checkable: bool = False) -> QAction:
        action = QAction(text, self)
        action.setToolTip(tip + (f" ({shortcut})" if shortcut else ""))
        action.setCheckable(checkable)
        if shortcut:
            action.setShortcut(QKeySequence(shortcut))
            action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            self.shortcut_actions.append(action)
        return action


class SearchRow(QWidget):
    """The breadcrumb of subgraphs on the left (`crumbChosen`: the position of the graph
    picked, 0 the main one); the search field, previous and next match (Shift+F3, F3) and
    the match counter on the right."""

    crumbChosen = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        row = QHBoxLayout(self)
        row.setContentsMargins(4, 0, 4, 0)
        row.setSpacing(2)
        self.crumbs = QWidget(self)
        self.crumb_layout = QHBoxLayout(self.crumbs)
        self.crumb_layout.setContentsMargins(0, 0, 0, 0)
        self.crumb_layout.setSpacing(2)
        self.crumb_buttons: list[QToolButton] = []
        row.addWidget(self.crumbs)
        row.addStretch(1)
        self.search = QLineEdit(self)
        self.search.setPlaceholderText("Find node, op type or tensor (Ctrl+F)")
        self.search.setClearButtonEnabled(True)
        self.search.setMinimumWidth(180)
        row.addWidget(self.search, 2)
        self.previous_action = QAction("◀", self)
        self.next_action = QAction("▶", self)
        for action, tip, key in ((self.previous_action, "Previous match", "Shift+F3"),
                                 (self.next_action, "Next match", "F3")):
            action.setToolTip(f"{tip} ({key})")
            action.setShortcut(QKeySequence(key))
            action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            button = QToolButton(self)
            button.setDefaultAction(action)
            button.setAutoRaise(True)
            row.addWidget(button)
        self.hit_label = QLabel("", self)
        self.hit_label.setMinimumWidth(56)
        row.addWidget(self.hit_label)

    def set_crumbs(self, titles: list[str]) -> None:
        """One button per graph from the main one down to the one shown (that one off);
        the row of them shows only below the main graph."""
        while self.crumb_layout.count():
            item = self.crumb_layout.takeAt(0)
            widget = item.widget() if item is not None else None
            if widget is not None:
                widget.deleteLater()
        self.crumb_buttons = []
        for k, title in enumerate(titles):
            if k:
                self.crumb_layout.addWidget(QLabel("›", self.crumbs))
            button = QToolButton(self.crumbs)
            button.setText(title)
            button.setAutoRaise(True)
            button.setEnabled(k < len(titles) - 1)
            button.clicked.connect(lambda _c=False, k=k: self.crumbChosen.emit(k))
            self.crumb_layout.addWidget(button)
            self.crumb_buttons.append(button)
        self.crumbs.setVisible(len(titles) > 1)
